// Package docs holds pollbal's documentation beyond the README: protocol.md (the backend
// protocol) and configuration.md (every configuration key). It has no code: its tests keep the
// Markdown true (the configuration reference is the shipped file, its examples print what
// pollbal prints) and its links working.
package docs
