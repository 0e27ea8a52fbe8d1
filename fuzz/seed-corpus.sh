#!/usr/bin/env bash
# Writes the golden vectors (tests/vectors/protocol.json) as seed inputs under
# fuzz/corpus/<target>/: messages and invalid messages for decode and decode_header,
# descriptors for descriptor, frames for frame, data frames for data_frame. Needs jq and xxd.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
vectors="$here/../tests/vectors/protocol.json"

# seed TARGET PREFIX JQ-FILTER: one file per {name, hex} the filter yields.
seed() {
    local target=$1 prefix=$2 filter=$3
    mkdir -p "$here/corpus/$target"
    jq -r "$filter | \"\(.name) \(.hex)\"" "$vectors" | while read -r name hex; do
        printf '%s' "$hex" | xxd -r -p > "$here/corpus/$target/$prefix-$name"
    done
}

for target in decode decode_header; do
    seed "$target" msg '.messages[]'
    seed "$target" internal '.internal[]'
    seed "$target" invalid '.invalid[]'
done
seed descriptor valid '.descriptors.valid[]'
seed descriptor invalid '.descriptors.invalid[]'
seed frame frame '.frames[]'
seed frame invalid '.frames_invalid[]'
seed data_frame valid '.data_frames.valid[]'
seed data_frame invalid '.data_frames.invalid[]'
