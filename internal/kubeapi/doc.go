// Package kubeapi is switchyard's client of the API server: Services,
// EndpointSlices and Nodes, listed and watched by client-go informers,
// and a Node read by name. Nothing else.
//
// It is built on client-go's REST client with a scheme of the two API
// groups it reads (core/v1 and discovery/v1), not on the generated
// clientset: that one registers every API group of Kubernetes (about 50)
// at start, which made the daemon's binary ~20 MB larger and kept that
// much more of it resident, in every mode and at every size.
//
// Package kubeapi/clientset adapts a clientset (client-go's fake one, in
// tests) to the same interface.
package kubeapi
