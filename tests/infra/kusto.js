// Every query given on stdin, parsed and analysed by Microsoft's Kusto parser (@kusto/language-service-next,
// the library behind the Azure portal's query editor) against the tables given with them. Prints, as
// JSON, each query's diagnostics: {"name": [{"code", "severity", "message", "start"}]}.
// Input: {"tables": {"customEvents": "(timestamp:datetime, name:string, ...)"}, "queries": {"name": "..."}}.
const path = require("path");
const root = path.join(__dirname, "..", "..", "node_modules", "@kusto", "language-service-next");
global.Bridge = require(path.join(root, "bridge.js"));
require(path.join(root, "Kusto.Language.Bridge.js"));
const K = global.Kusto.Language;

let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const { tables, queries } = JSON.parse(input);
  const symbols = Object.entries(tables).map(([name, schema]) => K.Symbols.TableSymbol.From(schema).WithName(name));
  const database = new K.Symbols.DatabaseSymbol.$ctor3("oncegate", null, Bridge.toList(symbols), false);
  const globals = K.GlobalState.Default.WithDatabase(database);
  const found = {};
  for (const [name, query] of Object.entries(queries)) {
    const diagnostics = K.KustoCode.ParseAndAnalyze(query, globals).GetDiagnostics();
    found[name] = [];
    for (let i = 0; i < diagnostics.Count; i++) {
      const d = diagnostics.getItem(i);
      found[name].push({ code: d.Code, severity: d.Severity, message: d.Message, start: d.Start });
    }
  }
  process.stdout.write(JSON.stringify(found));
});
