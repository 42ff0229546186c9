// Package httpx is the HTTP edge shared by the order and payment services: a
// gin engine with the project's middleware, RFC 9457 problem+json errors, strict
// JSON input, server timeouts with a graceful drain, health/readiness routes and
// the two ways a caller proves who it is (internal bearer token, X-User-ID).
//
// Guarantees:
//   - Every response, including 404, 405, 413 and a recovered panic, carries
//     X-Request-ID. A well-formed incoming id (1–128 of [A-Za-z0-9._-]) is kept
//     so a trace crosses services; anything else is replaced by a fresh UUID, so
//     a client cannot inject log lines or unbounded values. The id is in the
//     request's context.Context (RequestIDFrom) for events caused by the request.
//   - Every error a client sees is application/problem+json with a stable code.
//     Codes map to statuses through one table (StatusOf) reached by errors.As, so
//     wrapping a domain error never turns it into a 500. An error that is not an
//     *apperr.Error, or whose code is missing from the table, becomes a 500
//     "internal" with a generic detail; its cause is logged with the request id
//     and never sent to the client.
//   - A panicking handler answers 500 and is logged with its stack; the engine
//     keeps serving the next request.
//   - Request bodies are capped (64 KiB by default) whether or not they declare a
//     Content-Length: 413 body_too_large, never a partial read that decodes.
//   - Our own API rejects unknown JSON fields, wrong types, trailing data and
//     (for inputs that are required) an empty body with 400 invalid_json. The
//     lenient binder, for the payment gateway's callback, ignores unknown fields
//     but keeps types strict, and shares the exact bytes it decoded with the
//     signature check (ReadBody), so what was verified is what was decoded.
//   - Metrics and access logs label requests by route template ("unmatched" for
//     no route), never by raw path, so cardinality stays bounded.
//   - The internal bearer token is compared in constant time, also with respect
//     to its length; a failed check answers 401 without running the handler.
//   - Serve stops accepting on context cancellation and lets in-flight requests
//     finish within the drain bound.
//
// Failure boundary:
//   - encoding/json (v1) matches object keys to struct fields case-insensitively
//     and lets a duplicated key overwrite the earlier one; such bodies are
//     accepted. A JSON null for a non-pointer field leaves its zero value, so
//     domain validation must reject zero values it cannot accept. Type errors
//     name the field path without array indexes ("items.quantity").
//     encoding/json/v2 fixes the first two once it leaves GOEXPERIMENT.
//   - A handler that never reads its body is not protected from a large chunked
//     upload beyond what net/http discards before closing the connection.
//   - A response already started (headers written) cannot be turned into a
//     problem: a panic or error after that point is logged, and the client sees a
//     truncated response.
//   - A readiness probe that ignores its context keeps running in the background
//     after /readyz has answered; only the answer is bounded by the timeout.
//   - Content-Type is not checked on input: a JSON body sent as text/plain is
//     decoded like any other.
package httpx
