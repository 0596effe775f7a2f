// Package docs holds pollbal's documentation beyond the README, which is a front page: concepts,
// rolling updates, fleets, operating, configuration (every key), the backend protocol, the
// access log, the demo and the architecture. It has no code: its tests keep the Markdown true
// (the configuration reference is the shipped file, its examples print what pollbal prints,
// every metric of the code is documented, the architecture table is the code's imports), the
// README short, and every link working.
package docs
