package configs

import "pollbal/internal/regularfile"

// MaxFileSize is the largest configuration file pollbal reads: far above any real
// configuration, and small enough that reading and decoding one cannot exhaust memory.
const MaxFileSize = 16 << 20

// readFile reads the configuration file at path, for run, check and reloads alike: only a
// regular file (after symlinks) of at most MaxFileSize bytes, refused at once otherwise (see
// regularfile.Read). The reason is part of the config_invalid rejection.
func readFile(path string) ([]byte, error) {
	return regularfile.Read(path, MaxFileSize)
}
