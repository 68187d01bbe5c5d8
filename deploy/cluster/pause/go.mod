// The pod sandbox ("pause") process of the test cluster: there is no registry to pull
// registry.k8s.io/pause from, so the cluster builds its own.
module railfence.local/cluster/pause

go 1.24.0
