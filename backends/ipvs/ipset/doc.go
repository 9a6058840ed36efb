// Package ipset drives the kernel's IP sets for the IPVS backend.
//
// Interface is the seam: Save returns `ipset save` text and Restore feeds
// `ipset restore`. The real implementation (Runner) execs the ipset
// binary with arguments only, never a shell, optionally inside a named
// network namespace; backends/ipvs/ipvstest has a strict, stateful fake.
//
// The package also owns the text format both sides share: parsing restore
// commands and save output (ParseCommands, ParseSave) and writing entries
// in the canonical form `ipset save` prints them (Entry.Format), so the
// backend can diff what it wants against what the kernel holds by plain
// string comparison.
package ipset
