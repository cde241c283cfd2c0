#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Turns the plain // comments of public headers that document something into doxygen comments.

    scripts/doc-comments.py include/remora/*.hpp     (edits in place; then clang-format -i)

- the file's head comment (after an SPDX line) becomes `/// \file` + `///` lines;
- a run of `//` lines at one indentation directly above a declaration becomes `///`
  (a section rule `// ---- x ----` and anything above it stays `//`; so does a run followed by a
  blank line, a preprocessor line, a closing brace or an access specifier);
- a `// note` after a member or enumerator (`x;  // note`, `y,  // note`) becomes `///< note`.
Only comment markers change, never code. Idempotent: comments already `///` are left alone, so
after a merge brings new `//` comments, run it again.
"""
import re, sys
decl_stop = re.compile(r'^\s*($|//|#|\}|public:|private:|protected:)')
pure = re.compile(r'^(\s*)//( |$)(.*)')
trail = re.compile(r'^(\s*)(\S.*?[;,]|\S.*?\{\s*\})(\s+)// (.*)$')
for path in sys.argv[1:]:
    lines = open(path).read().split('\n')
    out = []
    i = 0
    # head block (after an SPDX line)
    if lines and lines[0].startswith('// SPDX-License-Identifier'):
        out.append(lines[0]); i = 1
    if i < len(lines) and lines[i].startswith('// ') and not lines[i].startswith('///'):
        out.append('/// \\file')
        while i < len(lines) and pure.match(lines[i]):
            m = pure.match(lines[i]); out.append(m.group(1) + '///' + m.group(2) + m.group(3)); i += 1
    n = len(lines)
    while i < n:
        l = lines[i]
        m = pure.match(l)
        if m and not l.lstrip().startswith('///'):
            j = i
            while j < n and pure.match(lines[j]) and not lines[j].lstrip().startswith('///'):
                j += 1
            block = lines[i:j]
            # a section rule ("// ---- x ----") never joins a doc block
            k = 0
            for idx, b in enumerate(block):
                if re.match(r'^\s*// -{3,}', b): k = idx + 1
            out.extend(block[:k])
            rest = block[k:]
            nxt = lines[j] if j < n else ''
            indent_ok = len(m.group(1)) <= 8
            if rest and not decl_stop.match(nxt) and all(len(pure.match(b).group(1)) == len(pure.match(rest[0]).group(1)) for b in rest):
                for b in rest:
                    mm = pure.match(b); out.append(mm.group(1) + '///' + mm.group(2) + mm.group(3))
            else:
                out.extend(rest)
            i = j
            continue
        t = trail.match(l)
        if t and '///' not in l and '"' not in t.group(2):
            out.append(t.group(1) + t.group(2) + t.group(3) + '///< ' + t.group(4))
        else:
            out.append(l)
        i += 1
    open(path, 'w').write('\n'.join(out))
