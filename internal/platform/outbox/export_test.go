package outbox

import "time"

// SetAfterPublish installs the hook that runs after the broker acknowledged a
// round's messages and before the relay marks them (the crash point).
func SetAfterPublish(r *Relay, f func(eventIDs []string)) { r.afterPublish = f }

// SetOnFenced installs the hook that runs after a fenced write was refused.
func SetOnFenced(r *Relay, f func()) { r.onFenced = f }

// SetPruneEvery changes how often a holding relay prunes.
func SetPruneEvery(r *Relay, d time.Duration) { r.pruneEvery = d }
