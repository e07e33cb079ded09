// The VS Code client of `ccost lsp`: starts the language server over stdio for .ccost files.
// Everything the editor shows (diagnostics, hover, completion, definitions, formatting) comes from the
// server; this file only starts it with the command the user configured (ccost.server.command/args).
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const config = vscode.workspace.getConfiguration("ccost");
  const command = config.get("server.command", "ccost");
  const args = config.get("server.args", ["lsp"]);
  const serverOptions = {
    run: { command, args, transport: TransportKind.stdio },
    debug: { command, args, transport: TransportKind.stdio },
  };
  const clientOptions = {
    documentSelector: [{ scheme: "file", language: "ccost" }, { scheme: "untitled", language: "ccost" }],
  };
  client = new LanguageClient("ccost", "ccost language server", serverOptions, clientOptions);
  client.start().catch((err) => {
    vscode.window.showErrorMessage(
      `ccost: could not start \`${command} ${args.join(" ")}\` (${err.message}). ` +
        "Install it with `pip install 'ccost[lsp]'` or set ccost.server.command to your .venv/bin/ccost."
    );
  });
  context.subscriptions.push({ dispose: () => client && client.stop() });
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
