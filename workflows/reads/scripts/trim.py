"""Trim each read's low-quality tail (quality below '5'); drop reads shorter than MIN."""

import sys

path, minimum = sys.argv[1], int(sys.argv[2])
with open(path) as reads:
    lines = reads.read().splitlines()
for i in range(0, len(lines), 4):
    name, seq, _, qual = lines[i : i + 4]
    keep = len(qual)
    while keep and qual[keep - 1] < "5":
        keep -= 1
    if keep >= minimum:
        print(f"{name}\n{seq[:keep]}\n+\n{qual[:keep]}")
