#!/usr/bin/env bash
# scripts/check-layering.sh — src/fabric is the only code that talks to libfabric: no other C or
# C++ file of the repository includes <rdma/...> or calls a fi_* function (an identifier
# fi_[a-z_]+ followed by "("; comments and string literals are not code). The bench's
# plain-libfabric baselines, tools/remora/baseline.cpp (MSG) and baseline_rdm.cpp (RDM), are
# excepted by name.
# Exit 0 when clean; 1 with one file:line: text per offence.
set -euo pipefail
cd "$(dirname "$0")/.."

excepted='^(src/fabric/|tools/remora/baseline(_rdm)?\.cpp$)'
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
        }
        END { exit($bad) }
    ' "$f"; then
        found=1
    fi
done

if [[ $found -ne 0 ]]; then
    echo "check-layering: only src/fabric/ may include <rdma/...> or call fi_* (see README, Layout)" >&2
    exit 1
fi
echo "check-layering: ok (${#files[@]} files outside src/fabric)"
