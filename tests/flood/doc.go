// Package flood tests the servers under connection floods and file-descriptor
// exhaustion: each keeps serving, limits per user, and recovers.
package flood
