// Package e2e holds end-to-end tests: both services started as in
// production (app.Run, real HTTP between them, Kafka through kfake), on a
// fresh database each, driven only through their public and internal APIs.
package e2e
