// auditcheck verifies, with Go's golang.org/x/mod/sumdb/note and sumdb/tlog (an
// implementation independent of hsmca's audit/), what audit_xwrite wrote into DIR, then
// writes a checkpoint and proofs of its own for audit_xwrite to verify in turn.
//
//	auditcheck DIR
//
// It exits non-zero, naming the first check that failed, when Go disagrees with audit/.
// Built offline against Debian's golang-golang-x-mod-dev (crosscheck.sh).
package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const tileHeight = 8

var dir string

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "auditcheck: "+format+"\n", args...)
	os.Exit(1)
}

func read(rel string) []byte {
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		fail("%v", err)
	}
	return b
}

func lines(rel string) [][]string {
	var out [][]string
	sc := bufio.NewScanner(bytes.NewReader(read(rel)))
	for sc.Scan() {
		out = append(out, strings.Fields(sc.Text()))
	}
	return out
}

func num(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		fail("bad number %q", s)
	}
	return n
}

func hashOf(s string) tlog.Hash {
	var h tlog.Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != tlog.HashSize {
		fail("bad hash %q", s)
	}
	copy(h[:], b)
	return h
}

// The log: entries, their record hashes, and every stored hash tlog keeps for them.
var (
	entries [][]byte
	stored  []tlog.Hash
)

type hashes []tlog.Hash

func (h hashes) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		if x < 0 || x >= int64(len(h)) {
			return nil, fmt.Errorf("no stored hash %d", x)
		}
		out[i] = h[x]
	}
	return out, nil
}

func loadEntries() {
	b := read("entries.bin")
	for len(b) > 0 {
		if len(b) < 4 {
			fail("entries.bin: truncated")
		}
		n := binary.BigEndian.Uint32(b)
		entries = append(entries, b[4:4+n])
		b = b[4+n:]
	}
	for i, e := range entries {
		s, err := tlog.StoredHashes(int64(i), e, hashes(stored))
		if err != nil {
			fail("StoredHashes: %v", err)
		}
		stored = append(stored, s...)
	}
}

// treeHash is tlog.TreeHash, except that the empty tree's root is SHA-256 of the empty
// string (RFC 9162 §2.1.1, and what C2SP checkpoints carry); tlog returns a zero hash.
func treeHash(n int64) tlog.Hash {
	if n == 0 {
		return sha256.Sum256(nil)
	}
	h, err := tlog.TreeHash(n, hashes(stored))
	if err != nil {
		fail("TreeHash(%d): %v", n, err)
	}
	return h
}

func checkRoots() int {
	rows := lines("roots.txt")
	for _, f := range rows {
		if n := num(f[0]); treeHash(n) != hashOf(f[1]) {
			fail("roots.txt: the root of size %d differs from tlog.TreeHash", n)
		}
	}
	return len(rows)
}

func proofOf(fields []string) []tlog.Hash {
	var p []tlog.Hash
	for _, s := range fields {
		p = append(p, hashOf(s))
	}
	return p
}

func checkProofs() (int, int) {
	incl := lines("inclusion.txt")
	for _, f := range incl {
		idx, n := num(f[0]), num(f[1])
		p := proofOf(f[2:])
		if err := tlog.CheckRecord(p, n, treeHash(n), idx, tlog.RecordHash(entries[idx])); err != nil {
			fail("inclusion.txt: leaf %d in %d: tlog.CheckRecord: %v", idx, n, err)
		}
		if mine, _ := tlog.ProveRecord(n, idx, hashes(stored)); !equal(mine, p) {
			fail("inclusion.txt: leaf %d in %d differs from tlog.ProveRecord", idx, n)
		}
	}
	cons := lines("consistency.txt")
	for _, f := range cons {
		m, n := num(f[0]), num(f[1])
		p := proofOf(f[2:])
		if err := tlog.CheckTree(p, n, treeHash(n), m, treeHash(m)); err != nil && m > 0 {
			fail("consistency.txt: %d to %d: tlog.CheckTree: %v", m, n, err)
		}
		if m > 0 {
			if mine, _ := tlog.ProveTree(n, m, hashes(stored)); !equal(mine, p) {
				fail("consistency.txt: %d to %d differs from tlog.ProveTree", m, n)
			}
		} else if len(p) != 0 {
			fail("consistency.txt: a proof from size 0 must be empty")
		}
	}
	return len(incl), len(cons)
}

func equal(a, b []tlog.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// parseCheckpoint reads a C2SP tlog-checkpoint body on its own terms (tlog.ParseTree
// wants the go.sum origin line).
func parseCheckpoint(text string) (origin string, tree tlog.Tree) {
	f := strings.SplitN(text, "\n", 4)
	if len(f) != 4 {
		fail("checkpoint: fewer than three lines")
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != f[1] {
		fail("checkpoint: bad size %q", f[1])
	}
	h, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil || len(h) != tlog.HashSize {
		fail("checkpoint: bad root %q", f[2])
	}
	tree.N = n
	copy(tree.Hash[:], h)
	return f[0], tree
}

func verifier() (note.Verifiers, string) {
	vkey := string(read("vkey"))
	pub, err := hex.DecodeString(string(read("pubkey.hex")))
	if err != nil || len(pub) != ed25519.PublicKeySize {
		fail("pubkey.hex: not a hex Ed25519 key")
	}
	origin := strings.SplitN(vkey, "+", 2)[0]
	if mine, err := note.NewEd25519VerifierKey(origin, ed25519.PublicKey(pub)); err != nil || mine != vkey {
		fail("vkey: %q, Go makes %q (%v)", vkey, mine, err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		fail("vkey: note.NewVerifier: %v", err)
	}
	return note.VerifierList(v), origin
}

// tiles reads the C2SP layout under a directory (log/ or pub/): Go's tile paths carry the
// height ("tile/8/"), C2SP's do not.
type tiles struct{ root string }

func tilePath(root string, t tlog.Tile) string {
	return root + "/tile/" + strings.TrimPrefix(t.Path(), fmt.Sprintf("tile/%d/", tileHeight))
}

func c2spPath(t tlog.Tile) string { return tilePath("log", t) }

func (tiles) Height() int { return tileHeight }
func (ts tiles) ReadTiles(list []tlog.Tile) ([][]byte, error) {
	var out [][]byte
	for _, t := range list {
		b, err := os.ReadFile(filepath.Join(dir, tilePath(ts.root, t)))
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
func (tiles) SaveTiles([]tlog.Tile, [][]byte) {}

// checkTiles compares each step of tiles.txt with tlog.NewTiles (whose partial tiles come
// in every width from the old one; C2SP needs only the new checkpoint's), each tile with tlog.ReadTileData, and
// each entry bundle with the entries.
func checkTiles() int {
	type step struct{ old, new int64 }
	var order []step
	got := map[step][]tlog.Tile{}
	for _, f := range lines("tiles.txt") {
		s := step{num(f[0]), num(f[1])}
		if len(got[s]) == 0 {
			order = append(order, s)
		}
		got[s] = append(got[s], tlog.Tile{H: tileHeight, L: int(num(f[2])), N: num(f[3]), W: int(num(f[4]))})
	}
	count := 0
	for _, s := range order {
		var want []tlog.Tile
		all := tlog.NewTiles(tileHeight, s.old, s.new)
		for i, t := range all {
			if i+1 < len(all) && all[i+1].L == t.L && all[i+1].N == t.N {
				continue // a narrower width of the same partial tile
			}
			if int64(t.W) <= s.old>>(tileHeight*t.L)-t.N<<tileHeight {
				continue // published at the old size already
			}
			want = append(want, t)
		}
		if fmt.Sprint(want) != fmt.Sprint(got[s]) {
			fail("tiles.txt: %d to %d: wrote %v, tlog.NewTiles wants %v", s.old, s.new, got[s], want)
		}
		for _, t := range want {
			data, err := tlog.ReadTileData(t, hashes(stored))
			if err != nil || !bytes.Equal(data, read(c2spPath(t))) {
				fail("%s: differs from tlog.ReadTileData (%v)", c2spPath(t), err)
			}
			if t.L == 0 {
				checkBundle(t, data)
			}
			count++
		}
	}
	return count
}

func checkBundle(t tlog.Tile, tile []byte) {
	checkBundleOf("log", entries, t, tile)
}

func checkBundleOf(root string, entries [][]byte, t tlog.Tile, tile []byte) {
	path := strings.Replace(tilePath(root, t), root+"/tile/0/", root+"/tile/entries/", 1)
	b := read(path)
	for i := 0; i < t.W; i++ {
		if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
			fail("%s: entry %d cut short", path, i)
		}
		n := int(binary.BigEndian.Uint16(b))
		e, idx := b[2:2+n], t.N<<tileHeight+int64(i)
		h, err := tlog.HashFromTile(t, tile, tlog.StoredHashIndex(0, idx))
		if err != nil || !bytes.Equal(e, entries[idx]) || h != tlog.RecordHash(e) {
			fail("%s: entry %d differs from the log or its tile (%v)", path, i, err)
		}
		b = b[2+n:]
	}
	if len(b) != 0 {
		fail("%s: %d bytes after %d entries", path, len(b), t.W)
	}
}

// checkCheckpoints opens every signed checkpoint with note.Open, checks its root with
// tlog.TreeHash, then proves records and growth from the tiles alone (tlog.TileHashReader
// authenticates each tile against the checkpoint).
func checkCheckpoints(vs note.Verifiers, origin string) int {
	names, err := filepath.Glob(filepath.Join(dir, "checkpoints", "*"))
	if err != nil || len(names) == 0 {
		fail("no checkpoints (%v)", err)
	}
	var trees []tlog.Tree
	for _, name := range names {
		msg, _ := os.ReadFile(name)
		n, err := note.Open(msg, vs)
		if err != nil {
			fail("%s: note.Open: %v", name, err)
		}
		o, tree := parseCheckpoint(n.Text)
		if o != origin || n.Sigs[0].Name != origin || len(n.Sigs) != 1 {
			fail("%s: origin %q, signed by %v", name, o, n.Sigs)
		}
		if tree.Hash != treeHash(tree.N) {
			fail("%s: root differs from tlog.TreeHash", name)
		}
		trees = append(trees, tree)
	}
	latest := trees[0]
	for _, tree := range trees {
		if tree.N > latest.N {
			latest = tree
		}
		if tree.N == 0 {
			continue
		}
		thr := tlog.TileHashReader(tree, tiles{"log"})
		if h, err := tlog.TreeHash(tree.N, thr); err != nil || h != tree.Hash {
			fail("tiles of size %d: tlog.TreeHash: %v", tree.N, err)
		}
		for _, idx := range []int64{0, tree.N / 3, tree.N / 2, tree.N - 1} {
			p, err := tlog.ProveRecord(tree.N, idx, thr)
			if err == nil {
				err = tlog.CheckRecord(p, tree.N, tree.Hash, idx, tlog.RecordHash(entries[idx]))
			}
			if err != nil {
				fail("tiles of size %d: record %d: %v", tree.N, idx, err)
			}
		}
		for _, old := range trees {
			if old.N == 0 || old.N > tree.N {
				continue
			}
			p, err := tlog.ProveTree(tree.N, old.N, thr)
			if err == nil {
				err = tlog.CheckTree(p, tree.N, tree.Hash, old.N, old.Hash)
			}
			if err != nil {
				fail("tiles of size %d: growth from %d: %v", tree.N, old.N, err)
			}
		}
	}
	msg, _ := os.ReadFile(filepath.Join(dir, "checkpoints", strconv.FormatInt(latest.N, 10)))
	if !bytes.Equal(read("log/checkpoint"), msg) {
		fail("log/checkpoint is not the latest checkpoint")
	}
	for _, bad := range []string{"bad_text.note", "bad_key.note"} {
		if _, err := note.Open(read(bad), vs); err == nil {
			fail("%s: note.Open accepted it", bad)
		}
	}
	return len(trees)
}

// writeOwn leaves a checkpoint signed by Go (with an extension line and a second, unknown
// signer) and Go's own proofs for audit_xwrite check.
func writeOwn(origin string) {
	skey, vkey, err := note.GenerateKey(nil, origin)
	if err != nil {
		fail("GenerateKey: %v", err)
	}
	wkey, _, err := note.GenerateKey(nil, "witness.example/go")
	if err != nil {
		fail("GenerateKey: %v", err)
	}
	signer, err1 := note.NewSigner(skey)
	witness, err2 := note.NewSigner(wkey)
	if err1 != nil || err2 != nil {
		fail("NewSigner: %v %v", err1, err2)
	}
	size := int64(len(entries)) * 2 / 3
	root := treeHash(size)
	text := fmt.Sprintf("%s\n%d\n%s\nextension line from Go\n", origin, size,
		base64.StdEncoding.EncodeToString(root[:]))
	both, err1 := note.Sign(&note.Note{Text: text}, signer, witness)
	other, err2 := note.Sign(&note.Note{Text: text}, witness)
	if err1 != nil || err2 != nil {
		fail("note.Sign: %v %v", err1, err2)
	}
	var proofs bytes.Buffer
	for i := int64(0); i < 400; i++ {
		n := 1 + (i*7919+i*i*104729)%int64(len(entries))
		m := 1 + (i*i*31+i*17)%n
		idx := (i * 65537) % n
		rp, err1 := tlog.ProveRecord(n, idx, hashes(stored))
		tp, err2 := tlog.ProveTree(n, m, hashes(stored))
		if err1 != nil || err2 != nil {
			fail("Prove: %v %v", err1, err2)
		}
		fmt.Fprintf(&proofs, "incl %d %d%s\n", idx, n, hexList(rp))
		fmt.Fprintf(&proofs, "cons %d %d%s\n", m, n, hexList(tp))
	}
	for name, data := range map[string][]byte{"go.vkey": []byte(vkey + "\n"), "go.note": both,
		"go_unknown.note": other, "go_proofs.txt": proofs.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			fail("%v", err)
		}
	}
}

func hexList(p []tlog.Hash) string {
	var s strings.Builder
	for _, h := range p {
		s.WriteString(" " + hex.EncodeToString(h[:]))
	}
	return s.String()
}

// checkPublished checks pub/, which hsmca's publisher (audit/audit_publish.c) wrote beside
// a real audit log: its vkey, every checkpoint (note.Open, root by tlog.TreeHash over the
// log's lines), every tile of the latest checkpoint (tlog.ReadTileData), every entry bundle,
// and records and growth proved from the tiles alone (tlog.TileHashReader).
func checkPublished(vs note.Verifiers, origin string) (int, int, int) {
	var lines [][]byte
	var hs hashes
	for _, l := range bytes.SplitAfter(read("pub/log"), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		if l[len(l)-1] != '\n' {
			fail("pub/log: a line without its newline")
		}
		lines = append(lines, l[:len(l)-1])
		s, err := tlog.StoredHashes(int64(len(lines)-1), l[:len(l)-1], hs)
		if err != nil {
			fail("pub/log: StoredHashes: %v", err)
		}
		hs = append(hs, s...)
	}
	root := func(n int64) tlog.Hash {
		if n == 0 {
			return sha256.Sum256(nil)
		}
		h, err := tlog.TreeHash(n, hs)
		if err != nil {
			fail("pub: TreeHash(%d): %v", n, err)
		}
		return h
	}
	if string(read("pub/vkey")) != string(read("vkey"))+"\n" {
		fail("pub/vkey: %q is not the key's vkey and a newline", read("pub/vkey"))
	}
	names, _ := filepath.Glob(filepath.Join(dir, "pub", "checkpoints", "*"))
	if len(names) < 5 {
		fail("pub/checkpoints: only %d", len(names))
	}
	var trees []tlog.Tree
	latest := tlog.Tree{N: -1}
	for _, name := range names {
		n, err := note.Open(read(strings.TrimPrefix(name, dir+"/")), vs)
		if err != nil {
			fail("%s: note.Open: %v", name, err)
		}
		o, tree := parseCheckpoint(n.Text)
		if o != origin || filepath.Base(name) != strconv.FormatInt(tree.N, 10) {
			fail("%s: origin %q, size %d", name, o, tree.N)
		}
		if tree.N > int64(len(lines)) || tree.Hash != root(tree.N) {
			fail("%s: root differs from tlog.TreeHash over pub/log", name)
		}
		trees = append(trees, tree)
		if tree.N > latest.N {
			latest = tree
		}
	}
	if !bytes.Equal(read("pub/checkpoint"), read("pub/checkpoints/"+strconv.FormatInt(latest.N, 10))) {
		fail("pub/checkpoint is not the latest checkpoint")
	}
	ntiles := 0
	all := tlog.NewTiles(tileHeight, 0, latest.N)
	for i, t := range all {
		if i+1 < len(all) && all[i+1].L == t.L && all[i+1].N == t.N {
			continue // a narrower width of the same partial tile
		}
		data, err := tlog.ReadTileData(t, hs)
		if err != nil || !bytes.Equal(data, read(tilePath("pub", t))) {
			fail("%s: differs from tlog.ReadTileData (%v)", tilePath("pub", t), err)
		}
		if t.L == 0 {
			checkBundleOf("pub", lines, t, data)
		}
		ntiles++
	}
	thr := tlog.TileHashReader(latest, tiles{"pub"})
	if h, err := tlog.TreeHash(latest.N, thr); err != nil || h != latest.Hash {
		fail("pub tiles: tlog.TreeHash: %v", err)
	}
	nproofs := 0
	for _, idx := range []int64{0, 1, 255, 256, 65535, 65536, latest.N / 2, latest.N - 1} {
		p, err := tlog.ProveRecord(latest.N, idx, thr)
		if err == nil {
			err = tlog.CheckRecord(p, latest.N, latest.Hash, idx, tlog.RecordHash(lines[idx]))
		}
		if err != nil {
			fail("pub tiles: record %d: %v", idx, err)
		}
		nproofs++
	}
	for _, old := range trees {
		if old.N == 0 || old.N == latest.N {
			continue
		}
		p, err := tlog.ProveTree(latest.N, old.N, thr)
		if err == nil {
			err = tlog.CheckTree(p, latest.N, latest.Hash, old.N, old.Hash)
		}
		if err != nil {
			fail("pub tiles: growth from %d: %v", old.N, err)
		}
		nproofs++
	}
	return len(trees), ntiles, nproofs
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: auditcheck DIR")
	}
	dir = os.Args[1]
	loadEntries()
	vs, origin := verifier()
	roots := checkRoots()
	incl, cons := checkProofs()
	ntiles := checkTiles()
	ncp := checkCheckpoints(vs, origin)
	pcp, ptiles, pproofs := checkPublished(vs, origin)
	writeOwn(origin)
	fmt.Printf("auditcheck: Go agrees: %d entries, %d roots, %d inclusion and %d consistency "+
		"proofs, %d tiles and bundles, %d signed checkpoints\n",
		len(entries), roots, incl, cons, ntiles, ncp)
	fmt.Printf("auditcheck: Go agrees with the publisher: %d checkpoints, %d tiles and bundles, "+
		"%d proofs from its tiles\n", pcp, ptiles, pproofs)
}
