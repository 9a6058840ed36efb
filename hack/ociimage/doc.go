// Command ociimage packs container images without a container engine or a
// registry: a root filesystem tar (from mmdebstrap, say) as the base layer,
// plus one layer of single files, directories and symlinks taken from the
// host, with an image config (entrypoint, command, environment). It writes a
// docker-archive tarball that `ctr images import` and `podman load` read, one
// image under every -tag given.
//
// The output is reproducible: every entry of the generated layer and the
// image's creation time carry SOURCE_DATE_EPOCH (0 when unset), entries are
// sorted, and owners are root.
//
// It exists so `make image` and the local node (hack/cluster) can build
// switchyard's image and the images upstream's e2e framework names on a
// machine with neither a Docker engine nor a registry; go-containerregistry
// does the image format.
//
// Usage:
//
//	ociimage -o switchyard.tar -tag localhost/switchyard:v1 \
//	  -layer rootfs.tar -file bin/switchyard:/usr/local/bin/switchyard:0755 \
//	  -entrypoint '["/usr/local/bin/switchyard"]'
//
// `ociimage index` takes the same flags once for several -arch values (a
// -layer, -file or -sbom written ARCH=VALUE applies to that architecture
// only) and writes an oci-archive instead: an OCI image layout in one tar
// whose index.json names one image index, listing an image per
// architecture (OCI media types, the platform from its config) and, for
// each -sbom, an artifact manifest (artifactType application/spdx+json)
// whose subject is that image. `ctr images import` and `podman load` read
// it and take the image of their own platform.
//
// `ociimage sbom` writes an SPDX 2.3 JSON SBOM of one architecture's image
// with spdx/tools-golang: the Go modules of the daemon's build info and the
// installed packages of the rootfs tar's dpkg status. `ociimage check`
// verifies an index archive (digests, platforms, each SBOM parsed and
// validated) and prints sizes and package counts; `ociimage extract`
// writes one platform's flattened file system as a tar.
//
// `ociimage registry -i pause.tar -image pause -tag testing -o layer.tar`
// writes one image as a layer holding /var/registry/pause in the layout
// agnhost's fake-registry-server serves (upstream fills it from
// registry.k8s.io when it builds agnhost; here it comes from the local
// pause image).
package main
