// Package embedded starts in-process stand-ins for the infrastructure, so the
// demo and the tests run on a machine with only Go: a SQLite file for MySQL,
// miniredis for Redis, and kfake (franz-go's Kafka-protocol cluster) for
// Kafka. Each listens on a free loopback port, never on a well-known one that a
// real server may hold, and is spoken to over TCP exactly like the real thing.
//
// What they do not guarantee: miniredis has no replication, persistence or
// cluster mode; kfake keeps data in memory unless given a directory and has a
// minimum consumer-group session timeout of 6 s; SQLite has one writer at a
// time. Concurrency and fault figures are therefore measured on real MariaDB
// and Redis in CI.
package embedded
