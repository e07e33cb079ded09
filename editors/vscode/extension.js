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
        "Set ccost.server.command to the ccost of your environment (for example .venv/bin/ccost); " +
        "if that ccost lacks the `lsp` extra, running `ccost lsp` in a terminal prints the command that adds it."
    );
  });
  context.subscriptions.push({ dispose: () => client && client.stop() });
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
