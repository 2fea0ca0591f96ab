#!/usr/bin/env bash
# Builds this example's two Charliecloud images from busybox (Debian: busybox-static), as
# image folders under images/: no registry needed. At a site you would build them with
# `ch-image build` (or use Apptainer .sif files) instead.
#
# Usage: bash make-images.sh    (in this folder; Charliecloud mounts this folder into the
# images at its own path, so each image gets that path as an empty folder)
set -euo pipefail
here=$(pwd -P)
busybox=$(command -v busybox || echo /bin/busybox)
for name in count report; do
    root=images/$name
    rm -rf "$root"
    mkdir -p "$root"/{bin,etc,tmp,proc,sys,dev,home,root,run} "$root$here"
    cp "$busybox" "$root/bin/busybox"
    for applet in sh cat printf echo ls mkdir tr sort wc; do
        ln -s busybox "$root/bin/$applet"
    done
    # Commands run with bash; busybox's sh stands in for it.
    printf '#!/bin/sh\nexec /bin/sh "$@"\n' > "$root/bin/bash"
    chmod 755 "$root/bin/bash"
    echo "root:x:0:0:root:/root:/bin/sh" > "$root/etc/passwd"
    echo "root:x:0:" > "$root/etc/group"
    printf 'ID=%s-image\nNAME="hpcflow example %s"\n' "$name" "$name" > "$root/etc/os-release"
done
echo "images built: images/count images/report"
