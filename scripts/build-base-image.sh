#!/usr/bin/env bash
# Build a Debian base image locally (debootstrap + docker import) for machines that cannot pull
# from a registry. Produces an image equivalent in content to debian:<suite>-slim's minbase.
#
# usage: build-base-image.sh TAG [SUITE] [MIRROR]
#   TAG     image tag to create, e.g. debian:bookworm-slim
#   SUITE   Debian suite (default: bookworm)
#   MIRROR  Debian mirror URL (default: http://deb.debian.org/debian)
set -euo pipefail

tag=${1:?usage: build-base-image.sh TAG [SUITE] [MIRROR]}
suite=${2:-bookworm}
mirror=${3:-http://deb.debian.org/debian}
docker=${DOCKER:-docker}

command -v debootstrap >/dev/null || { echo "build-base-image: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "build-base-image: debootstrap needs root" >&2; exit 1; }

root=$(mktemp -d /tmp/base-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT

echo "build-base-image: debootstrap --variant=minbase $suite from $mirror"
if ! debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1; then
  tail -n 20 "$root.log" >&2
  echo "build-base-image: debootstrap of $suite from $mirror failed (is the mirror reachable?)" >&2
  rm -f "$root.log"; exit 1
fi
rm -f "$root.log"

# Slim it the way the official -slim images do: no docs, man pages, apt lists or caches. Each package's
# /usr/share/doc/PKG/copyright stays: it is the license notice Debian ships with the package, and what
# the image's SBOM and license report read (docs/supply-chain.md).
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
       "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/log/*.log \
       "$root"/tmp/* "$root"/var/tmp/*
find "$root"/usr/share/doc -mindepth 1 -type f ! -name copyright -delete
find "$root"/usr/share/doc -mindepth 1 -type d -empty -delete
# The sources list debootstrap writes names the mirror used; keep it so apt inside builds uses it too.
cat > "$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
CFG
cat > "$root/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";
CFG

tar -C "$root" -c . | "$docker" import \
  --change 'CMD ["bash"]' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --message "debootstrap --variant=minbase $suite $mirror" - "$tag" >/dev/null
echo "build-base-image: tagged $tag ($("$docker" image inspect -f '{{.Size}}' "$tag" | awk '{printf "%d MiB", $1/1048576}'))"
