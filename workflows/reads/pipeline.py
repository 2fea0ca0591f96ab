"""The Python steps of the reads example: GC content per chunk, a report per sample."""

from __future__ import annotations

import json
from pathlib import Path


def gc_content(sample: str, n: str, chunk: str) -> dict:
    """Bases and G/C bases of the reads in one chunk of a sample's trimmed reads."""
    lines = Path(chunk).read_text().splitlines()
    sequences = lines[1::4]
    bases = sum(len(s) for s in sequences)
    gc = sum(s.count("G") + s.count("C") for s in sequences)
    return {"sample": sample, "chunk": n, "reads": len(sequences), "bases": bases, "gc": gc}


def report(sample: str, tissue: str, status: str, chunks: list[dict]) -> dict:
    """One sample's totals over its chunks, written to reports/SAMPLE.json."""
    bases = sum(c["bases"] for c in chunks)
    out = {
        "sample": sample,
        "tissue": tissue,
        "chunks": len(chunks),
        "reads": sum(c["reads"] for c in chunks),
        "gc_percent": round(100 * sum(c["gc"] for c in chunks) / bases, 2) if bases else 0.0,
    }
    Path("reports").mkdir(exist_ok=True)
    Path(f"reports/{sample}.json").write_text(json.dumps(out, indent=1) + "\n")
    return out


def summary(reports: list[dict]) -> int:
    """A table of every sample's report (summary.tsv); returns the number of samples."""
    lines = ["sample\ttissue\tchunks\treads\tgc_percent"]
    for r in sorted(reports, key=lambda r: r["sample"]):
        lines.append(f"{r['sample']}\t{r['tissue']}\t{r['chunks']}\t{r['reads']}\t{r['gc_percent']}")
    Path("summary.tsv").write_text("\n".join(lines) + "\n")
    return len(reports)
