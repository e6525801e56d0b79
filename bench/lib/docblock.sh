# Sourced by the bench scripts that write their summary into a docs page
# (DOC=docs/PAGE.md): one writer for every generated block.
#
# docblock PAGE NAME FILE: replace what stands between PAGE's
# `<!-- NAME:begin -->` and `<!-- NAME:end -->` lines with FILE's text.
# Exits 5 when PAGE has no such block (nothing is written then); the page
# is replaced in one rename, so an interrupted run never leaves half a page.
docblock() {
    python3 - "$1" "$2" "$3" <<'PY'
import os, sys
page, name, src = sys.argv[1:4]
b, e = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
text = open(page).read()
if b not in text or e not in text:
    print(f"{page} has no {b} … {e} block: add the two lines where the output belongs", file=sys.stderr)
    sys.exit(5)
head, rest = text.split(b, 1)
tail = rest.split(e, 1)[1]
block = open(src).read()
if not block.endswith("\n"):
    block += "\n"
tmp = f"{page}.new"
with open(tmp, "w") as f:
    f.write(f"{head}{b}\n{block}{e}{tail}")
os.replace(tmp, page)
print(f"wrote the {name} block in {page}")
PY
}

# docblock_check PAGE NAME: fail (exit 5) before a long run, not after,
# when PAGE has no NAME block.
docblock_check() {
    grep -qF "<!-- $2:begin -->" "$1" 2>/dev/null && grep -qF "<!-- $2:end -->" "$1" || {
        echo "$1 has no <!-- $2:begin --> … <!-- $2:end --> block: add the two lines where the output belongs" >&2
        exit 5
    }
}
