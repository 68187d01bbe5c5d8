// The etcd binary: the same entry point as etcd's own main.go, which lives in a module that is
// not published separately.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
