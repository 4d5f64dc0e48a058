#!/usr/bin/env bash
# Push the images to Amazon ECR (`make push`), or pull the last pushed ones as build cache (`make pull-cache`).
#
# usage: push.sh [push|pull-cache]
#
# push: each flavor's local image IMAGE_REPO:FLAVOR goes to ECR twice: as FLAVOR (moves with every push)
# and as FLAVOR-REVISION, REVISION being the git short sha the image was built from (its
# org.opencontainers.image.revision label, set by `make build`), so a job can pin one exact build. The
# repository is created if missing, with scan on push.
#
# Environment:
#   FLAVORS         flavors, default "cpu gpu"
#   IMAGE_REPO      local repository, default sagemaker-mxnet-horovod
#   ECR_REPO        ECR repository name, default IMAGE_REPO
#   AWS_ACCOUNT_ID  default: aws sts get-caller-identity
#   AWS_REGION      else AWS_DEFAULT_REGION, else aws configure get region
#   DRY_RUN=1       print every command and run none: no AWS call at all (an account or region not given
#                   shows as a placeholder). The local images are still checked: that is read-only.
#   DOCKER          Docker client, default docker
set -euo pipefail

mode=${1:-push}
docker=${DOCKER:-docker}
image_repo=${IMAGE_REPO:-sagemaker-mxnet-horovod}
ecr_repo=${ECR_REPO:-$image_repo}
read -r -a flavors <<<"${FLAVORS:-cpu gpu}"
# AWS CLI v2 would page describe/create output through less.
export AWS_PAGER=""

fail() { echo "$mode: $*" >&2; exit 1; }

case "${DRY_RUN:-}" in
  1 | true | yes) dry_run=1 ;;
  "" | 0 | false | no) dry_run="" ;;
  *) fail "DRY_RUN=$DRY_RUN: use 1 or leave it empty" ;;
esac
case "$mode" in push | pull-cache) ;; *) fail "unknown mode (push, pull-cache)" ;; esac
[ ${#flavors[@]} -gt 0 ] || fail "FLAVORS is empty (cpu, gpu)"
for flavor in "${flavors[@]}"; do
  case "$flavor" in cpu | gpu) ;; *) fail "unknown flavor $flavor in FLAVORS (cpu, gpu)" ;; esac
done

# One shell word, quoted only when it needs to be, so that the printed commands can be pasted.
quote() {
  if [[ $1 =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
    printf '%s' "$1"
  else
    printf "'%s'" "${1//\'/\'\\\'\'}"
  fi
}
words() {
  local line="" word
  for word in "$@"; do line+="${line:+ }$(quote "$word")"; done
  printf '%s' "$line"
}
show() { echo "+ $(words "$@")"; }
run() {
  show "$@"
  [ -n "$dry_run" ] || "$@"
}

# The local images and their revisions come first: a missing image fails before any AWS call.
declare -A revision_of=()
if [ "$mode" = push ]; then
  for flavor in "${flavors[@]}"; do
    image="$image_repo:$flavor"
    build_target=build
    [ "$flavor" = cpu ] || build_target=build-$flavor
    revision=$("$docker" image inspect -f '{{index .Config.Labels "org.opencontainers.image.revision"}}' "$image" \
      2>/dev/null) || fail "no image $image: run make $build_target first"
    # A tag is at most 128 characters of [A-Za-z0-9_.-]; "unknown" is the Dockerfile's default.
    if [[ ! $revision =~ ^[A-Za-z0-9_.-]{1,100}$ ]] || [ "$revision" = unknown ]; then
      fail "$image has no usable revision label (org.opencontainers.image.revision='$revision'):" \
        "build it with make in a git checkout, or pass VCS_REF=<git short sha> to make $build_target"
    fi
    revision_of[$flavor]=$revision
  done
fi

[ -n "$dry_run" ] || command -v aws >/dev/null || fail "the AWS CLI (aws) is not installed"

# Account and region: the environment's, else asked of the AWS CLI. A dry run asks nothing and shows
# what it would have asked, then a placeholder.
account=${AWS_ACCOUNT_ID:-}
if [ -z "$account" ]; then
  show aws sts get-caller-identity --query Account --output text
  if [ -n "$dry_run" ]; then
    account="<aws-account-id>"
  else
    account=$(aws sts get-caller-identity --query Account --output text) || fail "aws sts get-caller-identity failed"
  fi
fi
[ -n "$dry_run" ] || [[ $account =~ ^[0-9]{12}$ ]] || fail "AWS account id '$account' is not 12 digits"

region=${AWS_REGION:-${AWS_DEFAULT_REGION:-}}
if [ -z "$region" ]; then
  show aws configure get region
  if [ -n "$dry_run" ]; then
    region="<aws-region>"
  else
    # aws configure get exits 1 when no region is configured.
    region=$(aws configure get region) || region=""
    [ -n "$region" ] || fail "no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION), or aws configure set region REGION"
  fi
fi

registry="$account.dkr.ecr.$region.amazonaws.com"
remote="$registry/$ecr_repo"

# The password goes from one process to the other through the pipe, never through a variable or argument.
echo "+ $(words aws ecr get-login-password --region "$region") | $(words "$docker" login --username AWS \
  --password-stdin "$registry")"
if [ -z "$dry_run" ]; then
  aws ecr get-login-password --region "$region" \
    | "$docker" login --username AWS --password-stdin "$registry" >/dev/null \
    || fail "docker login to $registry failed"
fi

if [ "$mode" = pull-cache ]; then
  for flavor in "${flavors[@]}"; do
    # The first build has nothing to pull: it builds without cache.
    run "$docker" pull -q "$remote:$flavor" \
      || echo "$mode: cannot pull $remote:$flavor (none pushed yet?): building without it"
  done
  exit 0
fi

describe=(aws ecr describe-repositories --region "$region" --repository-names "$ecr_repo")
create=(aws ecr create-repository --region "$region" --repository-name "$ecr_repo"
  --image-scanning-configuration scanOnPush=true --image-tag-mutability MUTABLE)
show "${describe[@]}"
if [ -n "$dry_run" ]; then
  echo "$(show "${create[@]}")  # only if describe-repositories finds none"
elif ! out=$("${describe[@]}" 2>&1 >/dev/null); then
  # Only a missing repository is created: any other error (credentials, permissions) stops here.
  [[ $out == *RepositoryNotFoundException* ]] || fail "aws ecr describe-repositories failed: $out"
  show "${create[@]}"
  "${create[@]}" >/dev/null
  echo "$mode: created repository $remote (scan on push)"
fi

for flavor in "${flavors[@]}"; do
  # The revision tag first: the moving tag never points at an image that lacks one.
  for tag in "$flavor-${revision_of[$flavor]}" "$flavor"; do
    run "$docker" tag "$image_repo:$flavor" "$remote:$tag"
    run "$docker" push "$remote:$tag"
  done
done
[ -n "$dry_run" ] || echo "$mode: pushed ${flavors[*]} to $remote"
