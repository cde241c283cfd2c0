#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/check-layering.sh — src/fabric is the only code that talks to libfabric: no other C or
# C++ file of the repository includes <rdma/...> or calls a fi_* function (an identifier
# fi_[a-z_]+ followed by "("; comments and string literals are not code). The bench's
# plain-libfabric baselines, tools/remora/baseline.cpp (MSG) and baseline_rdm.cpp (RDM), and the
# header they share (baseline_raw.hpp), are excepted by name.
#
# Nor does the library outside src/fabric (src/ and include/) speak libfabric's vocabulary in
# code: no FI_* name (an identifier FI_[A-Z]...) and none of the types fi_info, fi_addr_t,
# fi_cq_*, fi_eq_*, fi_context*. src/fabric gives them remora's names (fabric_info, fabric_addr,
# fabric_errno, cq_flag_*, cm_event, provider_context, ...). Comments and string literals may name them (to explain a
# provider's behaviour, or which call failed): they are not code.
#
# Second, includes follow the layers of DESIGN.md (each depends only on those below it):
#   base    src/base/, include/remora/{result,units,version,log}.hpp: nothing of the library's but
#           base.
#   ops     src/ops/: base, fabric, and the vocabulary of completions (remora/completion_queue.hpp:
#           `completion`, `op`); nothing from core/, slots/, persist/.
#   core    src/core/ and the endpoint layer's public headers: nothing from slots/ or persist/,
#           nor their public headers (slot_pool, buffer_pool, receive_pool, registration_cache,
#           persistent_region, target_service).
#   upper   src/slots/, src/persist/ and src/access/ reach the endpoint layer through one header,
#           core/upper.hpp (the door, extensions, a few accessors; it includes the rest), and
#           the narrow core/multi_ops.hpp, core/peer_control.hpp, core/little_endian.hpp:
#           no other core/ header (impl.hpp, connection_impl.hpp, cq_impl.hpp, domain_impl.hpp,
#           door.hpp, ...), no ops/ and no fabric/ header directly.
#   replica src/replica/ (the replica set): the public C++ API and base only; nothing from
#           fabric, ops, core, slots, persist or access. Nothing below it includes src/replica/
#           or remora/replica_set.hpp.
#   capi    src/capi/ (the C API): the public C++ API only (include/remora/*.hpp) and its own
#           capi.hpp; nothing from src/ (base, fabric, ops, core, slots, persist, access).
#   remora.h include/remora/remora.h (and the remora_*.h it includes) is C: it
#           includes no C++ header of the library.
#   tools   tools/, examples/ and fio/: the public API only: nothing from src/, and no detail::
#           name (the baselines talk to libfabric directly, excepted above).
#   public  the public headers (include/remora/*.hpp) name no detail:: type in code (comments
#           may): a handle keeps its state behind a private opaque `struct impl;` that only the
#           library reaches (src/base/internal_access.hpp).
#   names   include/remora/connection.hpp, connection_config.hpp and op_options.hpp name no type
#           or verb of the persistence layer or the pools (flush, publish, service_depth,
#           write_copy, buffer_pool, registration_cache, ...): connection is lifecycle and
#           native verbs.
# Third, the one door (src/core/door.hpp): no code outside src/fabric/ and door.hpp posts or
# cancels on an endpoint itself (ep_post, ep_send, ep_recv, ep_write, ep_read, ep_atomic,
# ep_fetch_atomic, ep_compare_atomic, ep_cancel).
# Exit 0 when clean; 1 with one file:line: text per offence.
set -euo pipefail
cd "$(dirname "$0")/.."

excepted='^(src/fabric/|tools/remora/baseline(_rdm)?\.cpp$|tools/remora/baseline_raw\.hpp$)'
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
    '*.c' '*.cc' '*.cpp' '*.cxx' '*.h' '*.hh' '*.hpp' '*.hxx' '*.ipp' |
    grep -Ev "$excepted" | sort -u)

found=0
for f in "${files[@]}"; do
    [[ -f "$f" ]] || continue  # deleted in the work tree
    if ! perl -ne '
        BEGIN { $in_block = 0; $bad = 0; }
        my $raw = $_;
        my $code = $_;
        if ($code =~ /^\s*#\s*include\s*[<"]rdma\//) {
            chomp $raw; print "$ARGV:$.: $raw\n"; $bad = 1; next;
        }
        # Drop what is not code: block comments (across lines), string and character
        # literals, line comments.
        my $out = "";
        while (length $code) {
            if ($in_block) {
                if ($code =~ s/^.*?\*\///s) { $in_block = 0; } else { $code = ""; }
                next;
            }
            if ($code =~ s/^("(?:[^"\\]|\\.)*"|\x27(?:[^\x27\\]|\\.)*\x27)//) { $out .= "\"\""; next; }
            if ($code =~ s/^\/\*//) { $in_block = 1; next; }
            if ($code =~ s/^\/\/.*//s) { last; }
            if ($code =~ s/^([^"\x27\/]+|\/)//) { $out .= $1; next; }
            $out .= substr($code, 0, 1, "");
        }
        if ($out =~ /\bfi_[a-z_]+\s*\(/) {
            chomp $raw; print "$ARGV:$.: $raw\n"; $bad = 1;
        } elsif ($ARGV =~ m{^(src|include)/} &&
                 $out =~ /\b(FI_[A-Z]\w*|fi_info|fi_addr_t|fi_cq_\w+|fi_eq_\w+|fi_context\w*)\b/) {
            chomp $raw; print "$ARGV:$.: $raw ($1: libfabric vocabulary)\n"; $bad = 1;
        }
        END { exit($bad) }
    ' "$f"; then
        found=1
    fi
done

if [[ $found -ne 0 ]]; then
    echo "check-layering: only src/fabric/ may include <rdma/...>, call fi_* or, in src/ and include/, name FI_* constants or fi_info, fi_addr_t, fi_cq_*, fi_eq_*, fi_context types (see docs/architecture.md)" >&2
    exit 1
fi

upper_public='remora/(slot_pool|buffer_pool|receive_pool|registration_cache|persistent_region|target_service|persistence|replica_set)\.hpp'
core_public='include/remora/(connection|op_options|completion_queue|completion_channel|domain|memory_region|remote_region|listener|flags|coro)\.hpp'
layers=0
# check_includes GROUP FILE_REGEX FORBIDDEN_INCLUDE_REGEX (Perl regex, on the included path) [WHY]
check_includes() {
    local group=$1 files_re=$2 bad_re=$3 why=${4:-includes a layer above it} f line bad=0
    while IFS= read -r f; do
        [[ -f "$f" ]] || continue
        while IFS= read -r line; do
            echo "$f:$line"
            bad=1
        done < <(grep -nP "^\s*#\s*include\s*[<\"]($bad_re)" "$f" || true)
    done < <(git ls-files --cached --others --exclude-standard | grep -E "$files_re" | sort -u)
    if [[ $bad -ne 0 ]]; then
        echo "check-layering: $group $why (see the head of this script)" >&2
        layers=1
    fi
}
check_includes base '^(src/base/|include/remora/(result|units|version|log)\.hpp$)' \
    'core/|ops/|fabric/|slots/|persist/|replica/|remora/(?!(result|units|version|log)\.(hpp|h))'
check_includes ops '^src/ops/' \
    "core/|slots/|persist/|replica/|remora/(?!(result|units|completion_queue)\.hpp)"
check_includes core "^(src/core/|$core_public$)" "slots/|persist/|replica/|$upper_public"
check_includes capi '^src/capi/' 'base/|fabric/|ops/|core/|slots/|persist/|access/|replica/'
check_includes replica '^src/replica/' 'fabric/|ops/|core/|slots/|persist/|access/|capi/'
check_includes 'slots, persist or access' '^src/(slots|persist|access)/' 'replica/|remora/replica_set\.hpp'
check_includes 'slots, persist or access' '^src/(slots|persist|access)/' \
    'fabric/|ops/|core/(?!(upper|multi_ops|peer_control|little_endian)\.hpp)' \
    'includes a fabric or ops header, or core beyond core/upper.hpp'
check_includes remora.h '^include/remora/remora(_[a-z]+)?\.h$' 'remora/.*\.hpp'
check_includes 'tools, examples or fio' '^(tools/|examples/|fio/)' \
    'src/|base/|fabric/|ops/|core/|slots/|persist/|access/|capi/|replica/'
# ... and name nothing of the library's internals (the public API only).
while IFS= read -r hit; do
    echo "$hit"
    echo "check-layering: tools, examples and fio use the public API only (no detail:: names)" >&2
    layers=1
done < <(git ls-files --cached --others --exclude-standard -- 'tools/*' 'examples/*' 'fio/*' |
    grep -E '\.(c|cpp|hpp|h)$' | sort -u | xargs grep -nE '\bdetail::' || true)
# The public headers name no detail:: type (comments and string literals are not code).
while IFS= read -r hit; do
    echo "$hit"
    echo "check-layering: a public header names a detail:: type (keep it behind the handle's opaque impl)" >&2
    layers=1
done < <(git ls-files --cached --others --exclude-standard -- 'include/remora/*.hpp' | sort -u |
    xargs perl -ne '
        BEGIN { $in_block = 0; }
        my $code = $_; my $out = "";
        while (length $code) {
            if ($in_block) {
                if ($code =~ s/^.*?\*\///s) { $in_block = 0; } else { $code = ""; }
                next;
            }
            if ($code =~ s/^("(?:[^"\\]|\\.)*"|\x27(?:[^\x27\\]|\\.)*\x27)//) { next; }
            if ($code =~ s/^\/\*//) { $in_block = 1; next; }
            if ($code =~ s/^\/\/.*//s) { last; }
            $out .= substr($code, 0, 1, "");
        }
        if ($out =~ /\bdetail\s*::|\bnamespace\s+(?:\w+::)*detail\b/) { chomp; print "$ARGV:$.: $_\n"; }
        close ARGV if eof;
    ' || true)
if [[ $layers -ne 0 ]]; then
    exit 1
fi
# The endpoint layer's connection names none of the persistence layer's or the pools' types and
# verbs (they are theirs: persistence.hpp, buffer_pool.hpp, registration_cache.hpp, ...), in
# code or in comments.
upper_names='\b(flush|flush_options|flush_type|flush_method|flush_method_for|publish|atomic_path|service_depth|service_timeout|persistence_config|persistent_region|target_service|write_copy|send_copy|bounce|bounce_buffers|buffer_pool|pooled_buffer|slot_pool|receive_pool|registration_cache|cached_region)\b|\batomics\('
names=0
for f in include/remora/connection.hpp include/remora/connection_config.hpp \
    include/remora/op_options.hpp; do
    while IFS= read -r line; do
        echo "$f:$line"
        names=1
    done < <(grep -nP "$upper_names" "$f" || true)
done
if [[ $names -ne 0 ]]; then
    echo "check-layering: connection.hpp, connection_config.hpp or op_options.hpp names a persistence or pool type or verb (they belong to persistence.hpp and the slots headers)" >&2
    exit 1
fi
door=0
while IFS= read -r hit; do
    echo "$hit"
    door=1
done < <(git ls-files --cached --others --exclude-standard -- 'src/*.cpp' 'src/*.hpp' |
    grep -Ev '^(src/fabric/|src/core/door\.hpp$)' | sort -u |
    xargs grep -nP '\bep_(post|send|recv|write|read|atomic|fetch_atomic|compare_atomic|cancel)\s*\(' || true)
if [[ $door -ne 0 ]]; then
    echo "check-layering: a post or cancel outside the door (use door() or cancel_op() in src/core/door.hpp)" >&2
    exit 1
fi
echo "check-layering: ok (${#files[@]} files outside src/fabric; no libfabric vocabulary in the library's code outside it; base, ops and core include nothing above them; slots, persist and access reach core through core/upper.hpp; replica only the public API and base; capi only the public API; public headers name no detail:: type; every post through the door)"
