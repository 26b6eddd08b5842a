"""Process plumbing every layer may use, and which uses no other part of nsfleet: the bounded
memos of pure results and the one thread per worker that decodes and encodes big tables."""
