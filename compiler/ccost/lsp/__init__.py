"""Editor support: the language server (``ccost lsp``, on the optional pygls) and the TextMate grammar
generated for editors (``python -m ccost.lsp.textmate``). ``features`` holds the answers as plain
functions; ``server`` wires them to LSP. Nothing here is imported by ``ccost check``."""
