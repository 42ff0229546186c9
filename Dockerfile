# syntax=docker/dockerfile:1
# Builds both service binaries; pick one with --target order|payment
# (deploy/compose/compose.yaml does). The final image is Alpine (for busybox
# wget, used by the compose healthchecks on /readyz) and runs as a non-root
# user. Nothing secret is baked in: all configuration is environment.

FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/order ./cmd/order && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/payment ./cmd/payment

FROM alpine:3.22 AS runtime
RUN apk add --no-cache ca-certificates tzdata && \
    addgroup -S -g 10001 app && adduser -S -D -H -u 10001 -G app app
USER 10001:10001

FROM runtime AS order
COPY --from=build /out/order /usr/local/bin/order
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/order"]

FROM runtime AS payment
COPY --from=build /out/payment /usr/local/bin/payment
EXPOSE 8081
ENTRYPOINT ["/usr/local/bin/payment"]
