/**
 * Server-side HTML for the merchant portal: a tagged template that escapes every interpolated
 * value unless it is already `Html` (built by this module), so a value can only reach the page as
 * text.
 */
export class Html {
  constructor(readonly text: string) {}
  toString() {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!);
}

type Value = Html | string | number | boolean | null | undefined | readonly Value[];

function render(v: Value): string {
  if (v === null || v === undefined || v === false) return '';
  if (v instanceof Html) return v.text;
  if (Array.isArray(v)) return v.map(render).join('');
  return escapeHtml(String(v));
}

export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return new Html(out);
}

/** Reais typed in a form (`12,34`, `12.34`, `1.234,56`, `12`) as integer cents, or null. */
export function parseReais(text: string | undefined): number | null {
  if (text === undefined) return null;
  const t = text.trim().replace(/^R\$\s*/, '');
  let m = /^(\d{1,3}(?:\.\d{3})+|\d+),(\d{1,2})$/.exec(t);
  if (m) return Number(m[1]!.replace(/\./g, '')) * 100 + Number(m[2]!.padEnd(2, '0'));
  m = /^(\d+)(?:\.(\d{1,2}))?$/.exec(t);
  if (m) return Number(m[1]) * 100 + Number((m[2] ?? '0').padEnd(2, '0'));
  m = /^(\d{1,3}(?:\.\d{3})+)$/.exec(t);
  if (m) return Number(m[1]!.replace(/\./g, '')) * 100;
  return null;
}

export const PORTAL_CSS = `
:root{--fg:#1b1f24;--muted:#57606a;--bg:#f6f8fa;--card:#fff;--line:#d0d7de;--accent:#0b6e4f;--accent-fg:#fff;--err:#b42318;--ok:#0b6e4f;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
*{box-sizing:border-box}body{margin:0;line-height:1.5}
a{color:#0550ae}a:focus,button:focus,input:focus,select:focus,textarea:focus{outline:3px solid #f2b705;outline-offset:1px}
.skip{position:absolute;left:-999px}.skip:focus{left:8px;top:8px;background:#fff;padding:4px 8px;z-index:9}
header{background:#0d1117;color:#fff;padding:.6rem 1rem;display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center}
header .brand{font-weight:700;margin-right:auto;color:#fff;text-decoration:none}
header form{margin:0}header button{background:transparent;color:#fff;border:1px solid #8b949e}
nav{background:#161b22;overflow-x:auto;white-space:nowrap}
nav a{display:inline-block;color:#c9d1d9;padding:.55rem .8rem;text-decoration:none}
nav a[aria-current=page]{color:#fff;border-bottom:3px solid #3fb950}
main{max-width:1100px;margin:0 auto;padding:1rem}
h1{font-size:1.4rem;margin:.3rem 0 1rem}h2{font-size:1.1rem;margin:1.4rem 0 .6rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:1rem;margin-bottom:1rem}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(180px,1fr));gap:1rem}
.figure{font-size:1.5rem;font-weight:650}.label{color:var(--muted);font-size:.9rem}
table{border-collapse:collapse;width:100%;background:var(--card)}
th,td{text-align:left;padding:.45rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:.85rem;color:var(--muted);font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.scroll{overflow-x:auto;border:1px solid var(--line);border-radius:8px}
form.stack{display:grid;gap:.7rem;max-width:520px;align-content:start}
form.inline{display:flex;flex-wrap:wrap;gap:.5rem;align-items:end}
label{display:grid;gap:.2rem;font-weight:600;font-size:.92rem}
label.check{display:flex;gap:.4rem;align-items:center;font-weight:400}
input,select,textarea{font:inherit;padding:.45rem .5rem;border:1px solid #8c959f;border-radius:6px;background:#fff;min-width:0}
button,.button{font:inherit;padding:.45rem .9rem;border-radius:6px;border:1px solid var(--accent);background:var(--accent);color:var(--accent-fg);cursor:pointer;text-decoration:none;display:inline-block}
button.secondary{background:#fff;color:var(--accent)}button.danger{background:#fff;color:var(--err);border-color:var(--err)}
.flash{padding:.7rem 1rem;border-radius:6px;margin-bottom:1rem;border:1px solid}
.flash.error{background:#fdecea;border-color:var(--err);color:var(--err)}.flash.ok{background:#e6f4ea;border-color:var(--ok);color:var(--ok)}
.muted{color:var(--muted)}.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.88rem;word-break:break-all}
.badge{display:inline-block;padding:0 .45rem;border-radius:999px;font-size:.8rem;border:1px solid var(--line);background:#f6f8fa}
.badge.settled,.badge.completed,.badge.delivered,.badge.paid{background:#e6f4ea;border-color:#8fd19e}
.badge.failed,.badge.rejected{background:#fdecea;border-color:#f5a097}
.badge.pending,.badge.processing{background:#fff8c5;border-color:#e6cf5c}
fieldset{border:1px solid var(--line);border-radius:6px;min-width:0;margin:0;padding:.5rem .7rem}legend{font-weight:600}
.field-error{color:var(--err);font-weight:400;font-size:.88rem}[aria-invalid=true]{border-color:var(--err);border-width:2px}.hint{font-weight:400}
.events{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,17rem),1fr));gap:.1rem .8rem}
label.check{overflow-wrap:anywhere;min-width:0}label.check input{flex:none}
.events-list{overflow-wrap:anywhere;font-size:.88rem}
img.qr{width:240px;height:240px;image-rendering:pixelated;border:1px solid var(--line)}
pre{white-space:pre-wrap;word-break:break-all;background:#f6f8fa;padding:.5rem;border-radius:6px;font-size:.85rem;max-height:16rem;overflow:auto}
.login{max-width:420px;margin:8vh auto}
.lang{display:flex;gap:.6rem}.lang a{color:#c9d1d9;font-size:.9rem}.lang a[aria-current]{color:#fff;font-weight:650;text-decoration:none}
footer{max-width:1100px;margin:0 auto;padding:.5rem 1rem 1.5rem;font-size:.85rem}footer form.zone{display:flex;flex-wrap:wrap;gap:.4rem;align-items:center}footer form.zone label{display:flex;flex-wrap:wrap;gap:.4rem;align-items:center;font-weight:400}footer select,footer button{font-size:.85rem;padding:.2rem .4rem}
table.fields th{width:12rem}table.fields td{overflow-wrap:anywhere}.actions{display:flex;flex-wrap:wrap;gap:.6rem;align-items:center}.prose{white-space:pre-wrap;overflow-wrap:anywhere}
td.party{overflow-wrap:anywhere}.show-sm{display:none}
.receipt{max-width:760px}.receipt-amount{font-size:2rem;font-weight:700;margin:.2rem 0}
.receipt-parties{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,16rem),1fr));gap:1rem}
.receipt dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem .8rem;margin:.4rem 0}.receipt dt{color:var(--muted);font-size:.9rem}.receipt dd{margin:0;overflow-wrap:anywhere}
.receipt .code{font-size:1.05rem;font-weight:700;letter-spacing:.05em}.party-box h2{margin:.6rem 0 .2rem}.verify-at{overflow-wrap:anywhere}
table.timeline td.when{white-space:nowrap}table.timeline td.detail{overflow-wrap:anywhere}ul.postings{margin:.2rem 0;padding-left:1.1rem}ul.postings .num{font-variant-numeric:tabular-nums}
tr.attempt-detail td{border-bottom:1px solid var(--line);padding-top:0}h3{font-size:1rem;margin:.6rem 0 .3rem}
@media (max-width:600px){main{padding:.6rem}.hide-sm{display:none}.show-sm{display:block;font-size:.85rem;margin-top:.2rem}h1{font-size:1.2rem}th,td{padding:.4rem .3rem}table.fields th{width:auto}.receipt dl{grid-template-columns:1fr}table.timeline td.when{white-space:normal}}
@media print{header,nav,footer,.no-print,.skip{display:none!important}body{background:#fff}main{max-width:none;padding:0}.card{border:0;padding:0}.receipt{max-width:none}}
@media (max-width:600px){table.cards thead{display:none}table.cards tr{display:block;border-bottom:1px solid var(--line);padding:.4rem 0}table.cards td{display:block;border:0;padding:.15rem .6rem}table.cards td[data-label]::before{content:attr(data-label);display:block;font-size:.78rem;color:var(--muted);font-weight:600}.scroll:has(table.cards){overflow:visible}}
td form.inline{margin:.15rem 0}table.roles td.mono{white-space:nowrap}table.roles th,table.roles td{text-align:center}table.roles td.mono,table.roles th:first-child{text-align:left}
`;
