package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdxlib"
)

// SBOMCounts is what a valid SBOM lists.
type SBOMCounts struct {
	Name      string
	GoModules int // Go modules the binary links, the main module and stdlib excluded
	Debian    int // installed Debian packages
}

var spdxID = regexp.MustCompile(`^[A-Za-z0-9.-]+$`)

// ValidateSBOM parses an SPDX JSON document with tools-golang's reader,
// checks it with spdxlib.ValidateDocument (every relationship names an
// element of the document) and then the fields SPDX 2.3 makes mandatory
// that neither checks: version, data license, namespace, creators,
// creation time, and every package's name, unique identifier and download
// location. It returns the package counts.
func ValidateSBOM(b []byte) (SBOMCounts, error) {
	doc, err := json.Read(bytes.NewReader(b))
	if err != nil {
		return SBOMCounts{}, fmt.Errorf("spdx json: %w", err)
	}
	if err := spdxlib.ValidateDocument(doc); err != nil {
		return SBOMCounts{}, fmt.Errorf("spdxlib: %w", err)
	}
	if err := checkDocumentFields(doc); err != nil {
		return SBOMCounts{}, err
	}
	c := SBOMCounts{Name: doc.DocumentName}
	seen := map[string]bool{}
	for _, p := range doc.Packages {
		id := string(p.PackageSPDXIdentifier)
		switch {
		case p.PackageName == "" || p.PackageDownloadLocation == "":
			return c, fmt.Errorf("package %s: name and downloadLocation are mandatory", id)
		case !spdxID.MatchString(id) || seen[id]:
			return c, fmt.Errorf("package identifier %q is malformed or not unique", id)
		}
		seen[id] = true
		switch purl := purlOf(p); {
		case strings.HasPrefix(purl, "pkg:deb/"):
			c.Debian++
		case strings.HasPrefix(purl, "pkg:golang/") && p.PrimaryPackagePurpose == "" && p.PackageName != "stdlib":
			c.GoModules++
		}
	}
	return c, nil
}

func checkDocumentFields(doc *spdx.Document) error {
	switch {
	case doc.SPDXVersion != spdx.Version:
		return fmt.Errorf("spdxVersion %q, want %s", doc.SPDXVersion, spdx.Version)
	case doc.DataLicense != spdx.DataLicense:
		return fmt.Errorf("dataLicense %q, want %s", doc.DataLicense, spdx.DataLicense)
	case doc.DocumentName == "" || !strings.Contains(doc.DocumentNamespace, "://"):
		return fmt.Errorf("name %q / documentNamespace %q: both mandatory, the namespace a URI", doc.DocumentName, doc.DocumentNamespace)
	case doc.CreationInfo == nil || len(doc.CreationInfo.Creators) == 0:
		return fmt.Errorf("creationInfo.creators is mandatory")
	}
	if _, err := time.Parse(time.RFC3339, doc.CreationInfo.Created); err != nil {
		return fmt.Errorf("creationInfo.created: %w", err)
	}
	described, err := spdxlib.GetDescribedPackageIDs(doc)
	if err != nil || len(described) == 0 {
		return fmt.Errorf("the document describes no package: %v", err)
	}
	return nil
}

func purlOf(p *spdx.Package) string {
	for _, r := range p.PackageExternalReferences {
		if r.RefType == "purl" {
			return r.Locator
		}
	}
	return ""
}
