// The pause process every pod of the test cluster starts first (it holds the pod's namespaces):
// there is no registry to pull
// registry.k8s.io/pause from, so the cluster builds its own.
module railfence.local/cluster/pause

go 1.24.0
