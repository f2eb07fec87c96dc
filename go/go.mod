module github.com/engram-pm/engram-go

go 1.26
