#!/bin/sh
# A Debian bookworm base image for the Containerfile where no image registry can be reached: a root file system
# made by `debootstrap --variant=minbase bookworm` (once: kept as a tarball in ~/.cache/kumiho-ce), imported with
# `buildah from scratch`. Needs root, debootstrap and buildah (Debian's packages) and a Debian mirror.
#
#   container/minbase.sh [IMAGE]          IMAGE defaults to localhost/debian-bookworm-minbase
#
# The image is then the Containerfile's base: --build-arg BASE=localhost/debian-bookworm-minbase. Buildah's
# storage driver is vfs unless STORAGE_DRIVER says otherwise (vfs needs no kernel overlay support).
set -eu

image=${1:-localhost/debian-bookworm-minbase}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kumiho-ce
tarball=$cache/debian-bookworm-minbase.tar
buildah="buildah --storage-driver ${STORAGE_DRIVER:-vfs}"

if $buildah inspect --type image "$image" >/dev/null 2>&1; then
    echo "$image: already built"
    exit 0
fi

if [ ! -s "$tarball" ]; then
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    debootstrap --variant=minbase bookworm "$root" "$mirror"
    # the updates and security suites too, so that the image's apt-get installs current packages
    cat > "$root/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
SOURCES
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    mkdir -p "$cache"
    # /dev, /proc and /sys are the container runtime's to fill
    tar --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -C "$root" \
        -cf "$tarball.partial" .
    mv "$tarball.partial" "$tarball"
fi

container=$($buildah from scratch)
$buildah add "$container" "$tarball" /
$buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/bash \
    "$container"
$buildah commit "$container" "$image"
$buildah rm "$container" >/dev/null
