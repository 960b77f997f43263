"""syncode as a provider of objects: its import, its Python grammar with densecode's corrections, and its logits
processor (LALR parser, DFA mask store, byte tokenizer) built once per (tokenizer, grammar) and cached on disk.

- Mask-store cache collisions: syncode keys its cache by tokenizer class and vocab size only. densecode gives
  every tokenizer its own cache directory, `$DENSECODE_CACHE/syncode/<sha256 of the tokenizer's contents>/`
  (DENSECODE_CACHE defaults to ~/.cache/densecode), and caches the LALR tables syncode rebuilds per processor.
- Logging: `import syncode` resets the root logger to INFO on stdout; densecode restores the root logger and
  routes syncode's records through its own logger, counting its silent "Parsing failed!" fallbacks.

densecode/grammar.py drives these objects in the decoding loop (GrammarProcessor).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import os
import threading
import warnings
import weakref
from pathlib import Path

from densecode.errors import DensecodeError

logger = logging.getLogger(__name__)

GRAMMAR_DIR = Path(__file__).resolve().parent / "grammars"
CORRECTED_GRAMMAR = GRAMMAR_DIR / "python.lark"

_lock = threading.Lock()
_syncode_counter = None

# ------------------------------------------------------------------ syncode import


class _SyncodeLogCounter(logging.Handler):
    """Counts syncode's silent fallbacks and forwards its warnings to densecode's log."""

    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.parse_failures = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "Parsing failed" in message:
            self.parse_failures += 1
        if record.levelno >= logging.WARNING:
            logger.log(record.levelno, "syncode: %s", message.splitlines()[0] if message else "")


def import_syncode():
    """Import syncode without letting it take over the root logger."""
    global _syncode_counter
    with _lock:
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        try:
            import syncode
            import syncode.common
        finally:
            for handler in list(root.handlers):
                if handler not in handlers:
                    root.removeHandler(handler)
            for handler in handlers:
                if handler not in root.handlers:
                    root.addHandler(handler)
            root.setLevel(level)
        if _syncode_counter is None:
            _syncode_counter = _SyncodeLogCounter()
            syncode_logger = logging.getLogger("syncode")
            syncode_logger.addHandler(_syncode_counter)
            syncode_logger.propagate = False
            syncode_logger.setLevel(logging.INFO)
    return syncode


def syncode_parse_failures() -> int:
    """How many times syncode itself logged "Parsing failed!" in this process."""
    return _syncode_counter.parse_failures if _syncode_counter is not None else 0


# ------------------------------------------------------------------ cache + objects


def cache_root() -> Path:
    return Path(os.environ.get("DENSECODE_CACHE", "~/.cache/densecode")).expanduser()


_FINGERPRINTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def tokenizer_fingerprint(tokenizer) -> str:
    """A hash of what the tokenizer does (vocab, merges, normalizer, special tokens).

    Padding/truncation settings are left out: a padded batch call changes them in the
    backend, and they do not change what a token is.
    """
    try:
        cached = _FINGERPRINTS.get(tokenizer)
    except TypeError:  # not weak-referenceable
        cached = None
    if cached is not None and cached[0] == len(tokenizer):
        return cached[1]
    h = hashlib.sha256(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        data = json.loads(backend.to_str())
        data.pop("padding", None)
        data.pop("truncation", None)
        h.update(json.dumps(data, sort_keys=True, ensure_ascii=False).encode())
    else:
        h.update(json.dumps(sorted(tokenizer.get_vocab().items()), ensure_ascii=False).encode())
    h.update(json.dumps(getattr(tokenizer, "special_tokens_map", {}), sort_keys=True, default=str).encode())
    h.update(str(len(tokenizer)).encode())
    digest = h.hexdigest()[:16]
    try:
        _FINGERPRINTS[tokenizer] = (len(tokenizer), digest)
    except TypeError:
        pass
    return digest


def syncode_cache_dir(tokenizer) -> Path:
    return cache_root() / "syncode" / tokenizer_fingerprint(tokenizer)


def load_grammar(grammar_file: str | Path | None = None, *, corrected: bool = True):
    """syncode's Python `Grammar`, with densecode's corrected rules unless told otherwise.

    The grammar keeps the name "python": syncode switches on that name for its
    Python indenter and terminal simplifications (a grammar given by path loses both).
    """
    import_syncode()
    from syncode.parsers.grammars import Grammar

    grammar = Grammar("python")
    path = Path(grammar_file) if grammar_file else (CORRECTED_GRAMMAR if corrected else None)
    if path is not None:
        if not path.is_file():
            raise DensecodeError(f"grammar file not found: {path} (pass a Lark grammar file for Python)")
        simplifications = dict(_SIMPLIFICATIONS)
        # The mask store is cached by grammar hash: fold the simplifications into the text.
        digest = hashlib.sha256(json.dumps(simplifications, sort_keys=True).encode()).hexdigest()[:12]
        grammar.ebnf = path.read_text() + f"\n// densecode terminal simplifications {digest}\n"
        grammar.simplifications = lambda: dict(simplifications)
    return grammar


# Terminal patterns syncode builds its token-mask DFAs from (it cannot compile
# look-arounds). syncode's own set over-approximates newlines as "\n then anything",
# which accepts every token after a line break; these are the exact languages of
# densecode's grammar where possible, and widen string prefixes to rb/br/rf/fr.
_SIMPLIFICATIONS = {
    "COMMENT": "#[^\n]*(\r?\n[\t ]*)*",
    "_NL": "(\r?\n[\t ]*|#[^\n]*)+",
    "LONG_STRING": "(?i:(?s:[ubfr]{0,2}(\'\'\'.*?\'\'\'|\"\"\".*?\"\"\")))",
    # Single-quoted strings cannot hold a raw newline (only an escaped one).
    "STRING": "(?i:[ubfr]{0,2}(\"(\\\\(.|\\n)|[^\"\\\\\\n])*\"|'(\\\\(.|\\n)|[^'\\\\\\n])*'))",
}


_PROCESSORS: dict[tuple, object] = {}


@contextlib.contextmanager
def _cached_base_parsers(directory: Path):
    """Let syncode's uncached LALR builds (whitespace probe, mask store) use a disk cache.

    syncode builds the same LALR tables three times per processor and caches only
    one; each build takes seconds. Lark validates a cache file against the grammar
    and options, so one file per (grammar, indenter) variant is safe.
    """
    import syncode.grammar_mask.grammar_constrainer as constrainer_module
    import syncode.mask_store.mask_store as mask_store_module
    from syncode.parsers import create_base_parser

    def cached(grammar, parser="lalr", indenter=None, cache_filename=None):
        if cache_filename is None:
            variant = "indenter" if indenter is not None else "plain"
            cache_filename = str(directory / "parsers" / f"base_{parser}_{variant}_{grammar.hash()}.pkl")
            (directory / "parsers").mkdir(parents=True, exist_ok=True)
        base = create_base_parser(grammar, parser, indenter, cache_filename)
        if not hasattr(base, "ignore_tokens"):  # Lark restores this only when it compiles
            base.ignore_tokens = list(base.lexer_conf.ignore)
        return base

    saved = constrainer_module.create_base_parser, mask_store_module.create_base_parser
    constrainer_module.create_base_parser = mask_store_module.create_base_parser = cached
    try:
        yield
    finally:
        constrainer_module.create_base_parser, mask_store_module.create_base_parser = saved


def syncode_processor(tokenizer, grammar=None, indent: bool = True):
    """The `SyncodeLogitsProcessor` for (tokenizer, grammar), built once per process.

    Its mask store is cached on disk under this tokenizer's own directory: the first
    use per tokenizer builds it (seconds for a few thousand tokens, minutes for 32k+).
    """
    syncode = import_syncode()
    from syncode import common

    grammar = grammar if grammar is not None else load_grammar()
    key = (tokenizer_fingerprint(tokenizer), grammar.hash(), indent)
    with _lock:
        if key not in _PROCESSORS:
            directory = syncode_cache_dir(tokenizer)
            directory.mkdir(parents=True, exist_ok=True)
            previous = common.SYNCODE_CACHE
            # syncode reads this module attribute when it builds/loads parser and mask store.
            common.SYNCODE_CACHE = str(directory) + os.sep
            try:
                with warnings.catch_warnings(), _cached_base_parsers(directory):
                    warnings.simplefilter("ignore")
                    _PROCESSORS[key] = syncode.SyncodeLogitsProcessor(
                        grammar, tokenizer, mode="grammar_mask", parse_output_only=True, indent=indent
                    )
            finally:
                common.SYNCODE_CACHE = previous
            # The mask store and LALR tables are hundreds of thousands of objects that live as
            # long as the process: moved out of the garbage collector's way, a full collection
            # no longer walks them (0.4 s each on densecode-tiny, several per long generation).
            gc.collect()
            gc.freeze()
        return _PROCESSORS[key]


def _cache_fsm_states(fsms) -> None:
    """Make syncode's `FSMSet.compute_fsm_states(remainder)` incremental and cached.

    syncode runs every terminal's DFA over the whole remainder on each call (a token check
    and a mask each make one). The remainder mostly grows from one already seen (the last
    token plus a candidate), so: continue from the longest cached prefix, with only the
    terminals still alive there. Same answer (DFA runs are deterministic), fewer steps.
    """
    if getattr(fsms, "_densecode_incremental", False):
        return
    from syncode.mask_store.fsm_set import JointFSMState

    full = fsms.compute_fsm_states
    machines = fsms._terminals_to_byte_fsm
    cache: dict[bytes, list] = {}

    def compute_fsm_states(input_bytes: bytes):
        found = cache.get(input_bytes)
        if found is None:
            cut, shortest = len(input_bytes) - 1, max(1, len(input_bytes) - 32)  # a token's worth back
            while cut >= shortest and input_bytes[:cut] not in cache:
                cut -= 1
            if cut < shortest:
                cut = 0
            if cut <= 0:
                found = full(input_bytes)
            else:
                found = []
                tail = input_bytes[cut:]
                for state in cache[input_bytes[:cut]]:
                    machine, current = machines[state.terminal], state.state_id
                    for byte_val in tail:
                        current = machine.get_next_state(current, byte_val)
                        if current is None:
                            break
                    if current is not None:
                        found.append(JointFSMState(state.terminal, current))
            if len(cache) > 100_000:
                cache.clear()
            cache[input_bytes] = found
        return list(found)

    fsms.compute_fsm_states = compute_fsm_states
    fsms._densecode_incremental = True


def clear_processor_cache() -> None:
    """Forget the processors built in this process (the next syncode_processor call loads or builds its mask
    store again: what a mask-store timing needs)."""
    with _lock:
        _PROCESSORS.clear()
