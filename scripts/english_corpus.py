#!/usr/bin/env python3
"""Text extraction for scripts/prepare_english.sh (Python standard library only).

  english_corpus.py packages             the Debian packages to download, one a line
  english_corpus.py extract ROOT OUT     ROOT/<package>/ = each package unpacked with dpkg -x; writes one
                                         document per book or page as OUT/{train,val}/<source>-<name>.txt
                                         and OUT/sources.tsv (source, packages, license, documents)

Validation = whole documents: every 20th of each source (positions 10, 30, 50, ... in name order), and of
a source of 4 to 10 documents its middle one (Austen's Persuasion, so that validation has fiction too);
sources of 1 to 3 documents stay in training.
"""
import collections, glob, gzip, hashlib, html.parser, os, re, struct, subprocess, sys, bz2, lzma, zlib

# --- R serialization (the lazy-load databases and .rda files of the R packages) ----------------------
class RReader:
    """Just enough of R's XDR serialization for character vectors, integer vectors and data frames."""
    def __init__(self, data):
        self.b, self.p, self.refs = data, 0, []
    def int(self):
        self.p += 4
        return struct.unpack('>i', self.b[self.p - 4:self.p])[0]
    def bytes(self, n):
        self.p += n
        return self.b[self.p - n:self.p]
    def header(self):
        if self.bytes(2) != b'X\n': raise ValueError('not an XDR R serialization')
        version = self.int(); self.int(); self.int()
        if version == 3: self.bytes(self.int())  # native encoding name
        return self
    def item(self):
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, flags & 0x200, flags & 0x400
        if kind == 254: return None                       # NULL
        if kind == 255: return self.refs[(flags >> 8) - 1]  # reference to an earlier symbol
        if kind == 1:                                     # symbol
            self.refs.append(self.item()); return self.refs[-1]
        if kind == 9:                                     # CHARSXP; bit 2 of the levels = latin-1
            n = self.int()
            return None if n == -1 else self.bytes(n).decode('latin-1' if (flags >> 12) & 4 else 'utf-8')
        if kind == 2:                                     # pairlist (attributes): [(tag, value)]
            out = []
            while kind == 2:
                if has_attr: self.item()
                tag = self.item() if has_tag else None
                out.append((tag, self.item()))
                flags = self.int(); kind, has_attr, has_tag = flags & 0xFF, flags & 0x200, flags & 0x400
            if kind != 254: raise ValueError('unexpected pairlist tail %d' % kind)
            return out
        if kind in (10, 13, 16, 19):                      # logical, integer, character, list
            n = self.int()
            if kind in (10, 13): v = list(struct.unpack('>%di' % n, self.bytes(4 * n)))
            else: v = [self.item() for _ in range(n)]
            attrs = dict(self.item()) if has_attr else {}
            return (v, attrs) if attrs else v
        raise ValueError('unsupported R object type %d at byte %d' % (kind, self.p))

def r_lazyload(base):
    """R's lazy-load database base.rdx/.rdb (data.md A1) -> {name: object}."""
    index, _ = RReader(gzip.decompress(open(base + '.rdx', 'rb').read())).header().item()
    variables, names = index[0]
    rdb = open(base + '.rdb', 'rb').read()
    out = {}
    for name, (offset, length) in zip(names['names'], variables):
        blob = rdb[offset:offset + length]              # 4-byte length + a zlib stream
        out[name] = RReader(zlib.decompress(blob[4:])).header().item()
    return out

def r_rda(path):
    data = open(path, 'rb').read()
    for unpack in (gzip.decompress, bz2.decompress, lzma.decompress):
        try: data = unpack(data); break
        except (OSError, ValueError, lzma.LZMAError): pass
    if data[:5] not in (b'RDX2\n', b'RDX3\n'): raise ValueError(path + ': not an R data file')
    return dict(RReader(data[5:]).header().item())

def lines(vec):  # an R character vector of text lines -> text, as writeLines() writes it
    return ''.join((s or '') + '\n' for s in (vec[0] if isinstance(vec, tuple) else vec))

# --- HTML to text ------------------------------------------------------------------------------------
SKIP_TAGS = {'script', 'style', 'pre', 'table', 'nav', 'head', 'math', 'svg', 'header', 'footer', 'button',
             'form', 'select', 'textarea'}  # code blocks and tables are dropped: we want the prose
SKIP_CLASS = {'navigation', 'navheader', 'navfooter', 'sphinxsidebar', 'related', 'footer', 'docnav', 'toc',
              'contents', 'fancy_toc', 'highlight', 'headerlink', 'menu', 'breadcrumbs', 'nav-chapters',
              'nav-wrapper', 'literallayout', 'programlisting', 'screen', 'synopsis', 'cmdsynopsis', 'funcsynopsis'}
SKIP_ID = {'banner', 'title', 'sidebar', 'menu-bar', 'nav'}
PARAGRAPH = {'p', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'section', 'blockquote', 'dl', 'ul', 'ol'}
LINE = {'div', 'li', 'dt', 'dd', 'tr', 'article', 'title'}
VOID = {'br', 'img', 'hr', 'meta', 'link', 'input', 'wbr', 'col', 'area', 'base', 'source'}

class HtmlText(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out, self.open, self.skip = [], [], 0
    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            if tag == 'br' and not self.skip: self.out.append('\n')
            return
        a = dict(attrs)
        cls = set((a.get('class') or '').split())
        skip = (tag in SKIP_TAGS or bool(cls & SKIP_CLASS) or (tag == 'div' and 'header' in cls)  # texinfo's nav
                or a.get('id') in SKIP_ID or a.get('role') == 'navigation')
        self.open.append((tag, skip)); self.skip += skip
        if not self.skip and (tag in PARAGRAPH or tag in LINE): self.out.append('\n\n' if tag in PARAGRAPH else '\n')
    def handle_endtag(self, tag):
        for i in range(len(self.open) - 1, -1, -1):  # tolerate unclosed tags: pop to the matching one
            if self.open[i][0] == tag:
                self.skip -= sum(s for _, s in self.open[i:]); del self.open[i:]; break
        if not self.skip and (tag in PARAGRAPH or tag in LINE): self.out.append('\n')
    def handle_data(self, data):
        if not self.skip: self.out.append(re.sub(r'\s+', ' ', data))

def html_text(path):
    p = HtmlText(); p.feed(open(path, encoding='utf-8', errors='replace').read()); p.close()
    return '\n'.join(l.strip() for l in ''.join(p.out).split('\n'))

def prose_share(text):
    """Share of the characters in long lines that end like a sentence: low for indexes, tables of
    contents, option lists and API stubs."""
    ls = [l for l in text.split('\n') if l.strip()]
    prose = sum(len(l) for l in ls if len(l) >= 80 and l[-1] in '.?!:)"\'”’')
    return prose / max(1, sum(len(l) for l in ls))

def html_docs(root, package, pattern, exclude=None):
    """Pages -> {name: text}; drops symlinks and exact duplicates, lines repeated on many pages (site
    chrome such as '« previous | up | next »'), and pages that are short or mostly not prose."""
    base = os.path.join(root, package)
    files = [f for f in sorted(glob.glob(os.path.join(base, pattern), recursive=True))
             if not os.path.islink(f) and not (exclude and re.search(exclude, f))]
    if not files: raise SystemExit('english_corpus: no files match %s in %s' % (pattern, package))
    pages = {os.path.relpath(f, os.path.join(base, pattern.split('*')[0])): html_text(f) for f in files}
    count = collections.Counter(l for t in pages.values() for l in set(t.split('\n')) if l)
    chrome = {l for l, n in count.items() if n >= max(3, len(pages) // 10)}
    docs, seen = {}, set()
    for name, text in pages.items():
        text = '\n'.join(l for l in text.split('\n') if l not in chrome)
        text = re.sub(r'\n{3,}', '\n\n', text).strip() + '\n'
        key = hashlib.sha256(text.encode()).digest()
        if len(text) >= 2000 and prose_share(text) >= 0.5 and key not in seen:
            seen.add(key); docs[re.sub(r'\.html$', '', name)] = text
    return docs

# --- the sources -------------------------------------------------------------------------------------
AUSTEN_SHA256 = {  # data.md A5
    'emma': '7c67b5985c6d0de1efaeb5d342d52cb82c38083c40e2295129e30e87ee690ebe',
    'mansfieldpark': '98bc90519cdf4ef663ad7de2734bb529435ef24f7abbde6bb1a50898871dafe9',
    'northangerabbey': '51f91bbe0517db8e65cff009b097ce0a1836124c4e0532ac19e6c0cad982abed',
    'persuasion': '8061549557aebd2fd6e353d18d9197cb707029112bd52d4d8b174583a925848a',
    'prideprejudice': 'dfc684d4f857fa938268f9ab9c5567b64bd0691251eca959644adeabe6287a4d',
    'sensesensibility': '105e1651fe93bed7130078578efd31e0c557d68667ba672ddc876f735b30fe09'}

def kjv(root):  # the packaged reader dumps the verses: "Ge1:1 In the beginning ..." (as prepare_kjv.sh)
    out = subprocess.run([root + '/bible-kjv/usr/bin/bible', '-p', root + '/bible-kjv-text/usr/lib/', '-f',
                          'gen1:1-rev22:21'], check=True, capture_output=True, text=True).stdout
    books = collections.OrderedDict()
    for line in out.splitlines():
        ref, _, verse = line.partition(' ')
        books.setdefault(re.sub(r'[0-9]+:[0-9]+$', '', ref), []).append(verse + '\n')
    return {'%02d_%s' % (i + 1, b): ''.join(v) for i, (b, v) in enumerate(books.items())}

def austen(root):
    data = r_lazyload(root + '/r-cran-janeaustenr/usr/lib/R/site-library/janeaustenr/data/Rdata')
    docs = {name: lines(vec) for name, vec in data.items()}
    for name, sha in AUSTEN_SHA256.items():  # checks the R reader against the hashes in data.md
        got = hashlib.sha256(docs[name].encode()).hexdigest()
        if got != sha: raise SystemExit('english_corpus: %s.txt has sha256 %s, data.md says %s' % (name, got, sha))
    return docs

def moby_dick(root):  # Project Gutenberg #2701 with its license header and footer: keep the book only
    text = lines(r_lazyload(root + '/r-cran-tokenizers/usr/lib/R/site-library/tokenizers/data/Rdata')['mobydick'])
    text = text.split('*** START OF THIS PROJECT GUTENBERG EBOOK MOBY DICK; OR THE WHALE ***')[1]
    text = text.split('End of Project Gutenberg')[0].split('Produced by Daniel Lazarus and Jonesey')[1]
    return {'moby_dick': text.strip() + '\n'}

def tidytext_books(root):  # a data frame of (gutenberg_id, text line, title); Pride and Prejudice is in austen
    (ids, text, title), _ = r_rda(root + '/r-cran-tidytext/usr/lib/R/site-library/tidytext/extdata/books.rda')['books']
    books = collections.OrderedDict()
    for line, t in zip(text, title):
        if t != 'Pride and Prejudice': books.setdefault(re.sub(r'\W+', '_', t.lower()), []).append(line or '')
    return {name: '\n'.join(ls) + '\n' for name, ls in books.items()}

def devils_dictionary(root):  # dictd data: the preface, then the entries, then an alphabet line
    text = gzip.open(root + '/dict-devil/usr/share/dictd/devil.dict.dz', 'rt', encoding='utf-8').read()
    return {'devils_dictionary': text[text.index('PREFACE'):].rsplit(' abcdefghijklmnopqrstuvwxyz', 1)[0]}

def jargon(root):  # skip the table of contents; drop box-drawn tables and the one-term-a-line index lists
    text = gzip.open(root + '/jargon-text/usr/share/doc/jargon-text/jargon.txt.gz', 'rt', encoding='utf-8').read()
    text = text[text.index('Welcome to the Jargon File', text.index('Welcome to the Jargon File') + 1):]
    keep = [p for p in re.split(r'\n\s*\n', text) if not re.search('[─│┌┐└┘├┤┬┴┼═]', p) and
            ('\n' in p.strip() or p.strip()[-1:] in '.?!:' or p.strip().startswith(':'))]  # ':term:' = an entry
    return {'jargon_file': '\n\n'.join(re.sub(r'(?m)^   ', '', p.strip('\n')) for p in keep) + '\n'}

def manuals(*books):
    """An extractor over HTML manuals; books = (name prefix, package, page glob in it[, pages to leave out])."""
    return lambda root: {prefix + name: text for prefix, package, pattern, *exclude in books
                         for name, text in html_docs(root, package, pattern, *exclude).items()}

DOC = 'usr/share/doc/'
# (name, packages, license, extractor); prepare_english.sh's table lists them in this order.
SOURCES = [
    ('kjv', ['bible-kjv', 'bible-kjv-text'], 'public domain (package GPL-2+)', kjv),
    ('austen', ['r-cran-janeaustenr'], 'public domain (package MIT)', austen),
    ('melville', ['r-cran-tokenizers'], 'public domain (package MIT)', moby_dick),
    ('novels', ['r-cran-tidytext'], 'public domain (package MIT)', tidytext_books),
    ('bierce', ['dict-devil'], 'public domain', devils_dictionary),
    ('jargon', ['jargon-text'], 'public domain', jargon),
    ('python', ['python3.11-doc'], 'PSF-2.0', manuals(
        ('', 'python3.11-doc', DOC + 'python3.11/html/**/*.html', r'/html/(license|copyright)\.html$'))),
    ('django', ['python-django-doc'], 'BSD-3-Clause', manuals(
        ('', 'python-django-doc', DOC + 'python-django-doc/html/**/*.html'))),
    ('postgresql', ['postgresql-doc-15'], 'PostgreSQL', manuals(
        ('', 'postgresql-doc-15', DOC + 'postgresql-doc-15/html/*.html'))),
    # requirements.html repeats the other pages' sentences; capi3ref = c3ref/; releaselog/ = changes.html
    ('sqlite', ['sqlite3-doc'], 'public domain', manuals(
        ('', 'sqlite3-doc', DOC + 'sqlite3/**/*.html', r'/(requirements|capi3ref|.*crossref)\.html$|/releaselog/'))),
    # the books, not the API pages; print.html is all of a book's pages again
    ('rust', ['rust-doc'], 'MIT or Apache-2.0', manuals(*[
        (book + '_', 'rust-doc', DOC + 'rust-doc/html/%s/*.html' % book, r'/(print|toc|404)\.html$')
        for book in ('book', 'nomicon', 'reference')])),
    ('git', ['git-doc'], 'GPL-2', manuals(('', 'git-doc', DOC + 'git-doc/**/*.html'))),
    ('debian', ['debian-handbook', 'debian-reference-en', 'developers-reference', 'maint-guide', 'debian-faq',
                'harden-doc', 'debian-policy', 'gnu-standards'],
     'GPL-2 or GPL-2+ (handbook: GPL-2+ or CC-BY-SA-3.0; FAQ: SPI permission notice; gnu-standards: '
     'GFDL-1.3+, no invariant sections)', manuals(
         ('handbook_', 'debian-handbook', DOC + 'debian-handbook/html/en-US/*.html'),
         ('reference_', 'debian-reference-en', 'usr/share/debian-reference/*.en.html'),
         ('devref_', 'developers-reference', 'usr/share/developers-reference/*.html'),
         ('maint-guide_', 'maint-guide', DOC + 'maint-guide/html/*.en.html'),
         ('faq_', 'debian-faq', DOC + 'debian/FAQ/*.html'),
         ('harden_', 'harden-doc', DOC + 'harden-doc/html/en-US/*.html'),
         ('policy_', 'debian-policy', DOC + 'debian-policy/policy.html/*.html'),
         ('gnu-standards_', 'gnu-standards', DOC + 'gnu-standards/*.html'))),
]

def main():
    if sys.argv[1:] == ['packages']:
        print('\n'.join(p for s in SOURCES for p in s[1])); return
    if len(sys.argv) != 4 or sys.argv[1] != 'extract': raise SystemExit(__doc__)
    root, out = sys.argv[2], sys.argv[3]
    os.makedirs(out + '/train'); os.makedirs(out + '/val')
    with open(out + '/sources.tsv', 'w') as table:
        for name, packages, license, extract in SOURCES:
            docs = extract(root)
            pick = 10 if len(docs) > 10 else len(docs) // 2 if len(docs) >= 4 else -1
            for i, doc in enumerate(sorted(docs)):
                split = 'val' if i % 20 == pick else 'train'
                with open('%s/%s/%s-%s.txt' % (out, split, name, doc.replace('/', '_')), 'w', encoding='utf-8') as f:
                    f.write(docs[doc])
            table.write('%s\t%s\t%s\t%d\n' % (name, ' '.join(packages), license, len(docs)))
            print('english_corpus: %-10s %5d documents, %6.2f MB' % (
                name, len(docs), sum(len(t.encode()) for t in docs.values()) / 1e6), file=sys.stderr)

if __name__ == '__main__':
    main()
