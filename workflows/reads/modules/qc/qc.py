"""Read-level QC of one FASTQ file: reads, mean length, mean quality (Phred+33)."""

import json
import sys

path = sys.argv[1]
with open(path) as reads:
    lines = reads.read().splitlines()
quals = lines[3::4]
scores = [ord(c) - 33 for q in quals for c in q]
print(
    json.dumps(
        {
            "file": path,
            "reads": len(quals),
            "mean_length": round(sum(map(len, quals)) / len(quals), 1) if quals else 0,
            "mean_quality": round(sum(scores) / len(scores), 1) if scores else 0,
        }
    )
)
