module github.com/engram-pm/engram-go

go 1.26.0

require (
	github.com/redis/go-redis/v9 v9.23.0
	golang.org/x/tools v0.52.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
