#!/usr/bin/env bash
# Rebuilds internal/search/vectors/words.bin: 100-dimension static word vectors
# trained with Debian's fasttext on "corpus A" (docs/search.md, "Static word vectors: provenance"):
#   - Debian long package descriptions (apt's English translation index, main),
#   - WordNet glosses (wordnet-base: data.{noun,verb,adj,adv}).
# Then converts the text .vec into the compact int8 binary that internal/search
# embeds (see scripts/vectors/convert and internal/search/vectors/LICENSES.md).
#
# Needs root (apt-get) or the two packages already installed. Takes ~5 min on
# 2 cores. Training with 2 threads is not bit-for-bit reproducible: the result
# is committed; set THREADS=1 for a reproducible (about 2x slower) run.
#
# In-domain text: DOMAIN=FILE adds the lines of FILE (scripts/vectors/corpus
# writes them from the training part of the MCP catalogs, never toolret text)
# after deduplication, DOMAIN_REPEAT times (default 1) in the training input;
# the SIF word counts see them once. OUT overrides the output file.
#
# Usage: scripts/vectors/build.sh [WORKDIR]   (run from the repository root)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${1:-$(mktemp -d /tmp/toolplane-vectors.XXXXXX)}"
THREADS="${THREADS:-2}"
OUT="${OUT:-$ROOT/internal/search/vectors/words.bin}"
DOMAIN="${DOMAIN:-}"
DOMAIN_REPEAT="${DOMAIN_REPEAT:-1}"
WORDNET="${WORDNET:-glosses}" # glosses (the committed file) or synsets (measured, decision 0056)
MIN_COUNT="${MIN_COUNT:-5}"
mkdir -p "$WORK"
echo "workdir: $WORK"

if ! command -v fasttext >/dev/null || [ ! -d /usr/share/wordnet ]; then
  apt-get update -o Acquire::Languages=en
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends fasttext wordnet-base
fi
# Make sure the English translation index is present.
apt-get update -o Acquire::Languages=en >/dev/null

: >"$WORK/raw.txt"
found=0
for f in /var/lib/apt/lists/*_main_i18n_Translation-en*; do
  [ -e "$f" ] || continue
  found=1
  # apt-helper cat-file decompresses whatever apt stored (lz4, xz, gz, plain).
  /usr/lib/apt/apt-helper cat-file "$f" | awk '
    /^Description-en:/ { inblk=1; sub(/^Description-en: */, ""); print; next }
    /^ / && inblk { line=$0; if (line == " .") next; print line; next }
    { inblk=0 }' >>"$WORK/raw.txt"
done
if [ "$found" = 0 ]; then
  echo "no Translation-en index under /var/lib/apt/lists" >&2
  exit 1
fi
echo "debian description lines: $(wc -l <"$WORK/raw.txt")"

if [ "$WORDNET" = glosses ]; then
  for pos in noun verb adj adv; do
    # Data lines start with an 8-digit offset; the gloss follows " | ".
    grep -E '^[0-9]{8} ' "/usr/share/wordnet/data.$pos" | sed -n 's/^.* | //p' >>"$WORK/raw.txt"
  done
  echo "with wordnet glosses: $(wc -l <"$WORK/raw.txt")"
else
  # One line per synset: its lemmas, those of its hypernyms, similar and
  # related synsets, then the gloss (scripts/vectors/wordnet).
  (cd "$ROOT" && go run ./scripts/vectors/wordnet -wordnet /usr/share/wordnet) >>"$WORK/raw.txt"
  echo "with wordnet synsets: $(wc -l <"$WORK/raw.txt")"
fi

if [ -n "$DOMAIN" ]; then
  cat "$DOMAIN" >>"$WORK/raw.txt"
  echo "with in-domain lines: $(wc -l <"$WORK/raw.txt")"
fi

# Lowercase, split on non-alphanumerics, deduplicate lines.
tr '[:upper:]' '[:lower:]' <"$WORK/raw.txt" | sed -E 's/[^a-z0-9]+/ /g; s/^ +//; s/ +$//' |
  awk 'length($0) > 0 && !seen[$0]++' >"$WORK/counts.txt"
cp "$WORK/counts.txt" "$WORK/train.txt"
if [ -n "$DOMAIN" ] && [ "$DOMAIN_REPEAT" -gt 1 ]; then
  tr '[:upper:]' '[:lower:]' <"$DOMAIN" | sed -E 's/[^a-z0-9]+/ /g; s/^ +//; s/ +$//' |
    awk 'length($0) > 0 && !seen[$0]++' >"$WORK/domain.txt"
  for _ in $(seq 2 "$DOMAIN_REPEAT"); do cat "$WORK/domain.txt" >>"$WORK/train.txt"; done
fi
echo "training words: $(wc -w <"$WORK/train.txt")"

fasttext skipgram -input "$WORK/train.txt" -output "$WORK/vec" \
  -dim 100 -epoch 5 -minCount "$MIN_COUNT" -maxn 0 -thread "$THREADS"

cd "$ROOT"
go run ./scripts/vectors/convert -in "$WORK/vec.vec" -corpus "$WORK/counts.txt" -out "$OUT"
ls -l "$OUT"
