// The explorer page's behaviour (andrea.lens.explorer writes the data it reads into #data).
// A view is one set of maps: this input, or the mean over the run's validation rows. Each holds, per layer,
// head, query and key, a colour byte (on the PNG maps' colour scale), a weight byte (for the readouts) and a
// mask byte (1 where the query may not see the key: drawn grey); with a selection of keys, a byte more (1 where
// it left the key out: drawn pale).
const D = JSON.parse(document.getElementById("data").textContent);
const bytes = b64 => Uint8Array.from(atob(b64), c => c.charCodeAt(0));
const views = D.views.map(v => ({...v, colours: bytes(v.colours), weights: bytes(v.weights), masked: bytes(v.masked),
  left_out: v.left_out ? bytes(v.left_out) : null}));
const {L, H} = D;
const MASKED = D.masked_rgb;
// a key a selection left out (its layer's weights then dense attention's): its colour, faded toward white
const pale = rgb => rgb.map(c => Math.round(c * (1 - D.left_out_fade) + 255 * D.left_out_fade));
let view = 0, selected = {l: D.start[0], h: D.start[1]}, query = null;  // the run's task's best head
// The enlarged map's side in CSS pixels, and the room a tick's label takes (a 10 px line and a gap): every position
// is labelled while a cell has that room (the map grows to give it, up to BIG_MAX), else every step-th, a round step,
// so that no two labels overlap whatever the length.
const BIG_MIN = 384, BIG_MAX = 576, TICK_ROOM = 14, TICK_STEPS = [1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128];

const at = (v, l, h, t, j) => ((l * H + h) * v.T + t) * v.T + j;
const weight = (v, l, h, t, j) =>
  D.signed ? (v.weights[at(v, l, h, t, j)] / 127.5 - 1) * D.limit : v.weights[at(v, l, h, t, j)] / 255;

function drawHead(canvas, l, h) {
  const v = views[view], T = v.T;
  canvas.width = T; canvas.height = T;
  const ctx = canvas.getContext("2d"), img = ctx.createImageData(T, T);
  for (let t = 0; t < T; t++) for (let j = 0; j < T; j++) {
    const k = at(v, l, h, t, j), i = 4 * (t * T + j);
    const rgb = v.masked[(l * T + t) * T + j] ? MASKED : v.left_out && v.left_out[k] ? pale(D.lut[v.colours[k]])
      : D.lut[v.colours[k]];
    img.data[i] = rgb[0]; img.data[i + 1] = rgb[1]; img.data[i + 2] = rgb[2]; img.data[i + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
}

// A tick's label: the position and its token, cut to 12 characters; the position alone where the view's tokens are
// its positions (the mean view over many rows).
function tickLabel(v, j) {
  const token = v.tokens[j], positional = v.tokens.every((t, i) => t === String(i));
  return positional ? String(j) : `${j} ${token.length > 12 ? `${token.slice(0, 11)}…` : token}`;
}

function bigTicks() {
  const v = views[view], size = Math.min(BIG_MAX, Math.max(BIG_MIN, TICK_ROOM * v.T)), cell = size / v.T;
  const step = TICK_STEPS.find(s => s * cell >= TICK_ROOM) || Math.ceil(TICK_ROOM / cell);
  const big = document.getElementById("big");
  big.style.width = big.style.height = `${size}px`;
  for (const [id, along, across] of [["big-rows", "top", "Width"], ["big-columns", "left", "Height"]]) {
    const box = document.getElementById(id), ticks = [];
    for (let j = 0; j < v.T; j += step) {
      const tick = document.createElement("span");
      tick.textContent = tickLabel(v, j);
      tick.title = `${id === "big-rows" ? "query" : "key"} ${j}: ${JSON.stringify(v.tokens[j])}`;
      tick.style[along] = `${(j + 0.5) * cell}px`;  // centred on its row or column
      ticks.push(tick);
    }
    box.replaceChildren(...ticks);
    const longest = Math.max(0, ...ticks.map(tick => tick[`offset${across}`]));  // an upright label's is its height
    box.style[across.toLowerCase()] = `${longest + 8}px`;
  }
}

// Each role's best head on the view shown (the highest score; entropy's lowest), a click selecting it: the page
// opens on the run's choice, which another head may beat on this input.
function showBest() {
  const v = views[view], parts = [];
  for (const [role, [l, h, score]] of Object.entries(v.best)) {
    const link = document.createElement("a");
    link.href = "#"; link.textContent = `L${l}H${h}`;
    link.addEventListener("click", event => { event.preventDefault(); select(l, h); });
    parts.push(parts.length ? " · " : "", `${D.short[role] || role}${role === "entropy" ? " (lowest)" : ""} `, link,
               ` ${score.toFixed(2)}`);
  }
  document.getElementById("best").replaceChildren(...(parts.length ? [`Best head of each role on ${v.name}: `, ...parts] : []));
}

function showScores() {
  const v = views[view];
  document.querySelectorAll(".head").forEach(card => {
    const l = +card.dataset.layer, h = +card.dataset.head;
    card.querySelector(".scores").textContent = Object.entries(v.scores)
      .map(([role, s]) => `${D.short[role] || role} ${s[l][h] === null ? "n/a" : s[l][h].toFixed(2)}`).join(" · ");
  });
}

function showQuery(t) {
  const v = views[view];
  if (t >= v.T) return;
  query = t;
  const {l, h} = selected, ranked = [];
  document.querySelectorAll("#keys .tok").forEach((span, j) => {
    const w = weight(v, l, h, t, j), shade = Math.min(1, Math.abs(w) / D.limit).toFixed(3);
    const left = Boolean(v.left_out && v.left_out[at(v, l, h, t, j)]);  // a selection left the key out
    span.style.background = w < 0 ? `rgba(200, 40, 40, ${shade})` : `rgba(230, 120, 20, ${shade})`;
    span.classList.toggle("left-out", left);
    span.title = left ? `weight ${w.toFixed(3)} dense attention would give; left out by the selection`
      : `weight ${w.toFixed(3)}`;
    span.dataset.weight = w.toFixed(3);
    ranked.push([w, j, left]);
  });
  ranked.sort((a, b) => b[0] - a[0]);
  const top = ranked.slice(0, 3).map(([w, j, left]) =>
    `${JSON.stringify(v.tokens[j])} (${j}) ${w.toFixed(2)}${left ? " (left out)" : ""}`);
  document.getElementById("readout").textContent =
    `L${l}H${h}: query ${JSON.stringify(v.tokens[t])} (${t}) attends to ${top.join(", ")}`;
  document.querySelectorAll("#queries .tok").forEach((span, i) => span.classList.toggle("query", i === t));
}

function strips() {
  const v = views[view];
  for (const id of ["queries", "keys"]) {
    const strip = document.getElementById(id);
    strip.replaceChildren(...v.tokens.map(token => {
      const span = document.createElement("span");
      span.className = "tok"; span.textContent = token;
      return span;
    }));
  }
  document.querySelectorAll("#queries .tok").forEach((span, t) => span.addEventListener("mouseenter", () => showQuery(t)));
}

function showComposition() {
  const {l, h} = selected, lines = [];
  for (const [mode, s] of Object.entries(D.composition || {})) {
    const reads = [], read = [];
    for (let m = 0; m < L; m++) for (let g = 0; g < H; g++) {
      if (m < l) reads.push([s[m][g][l][h], `L${m}H${g}`]);
      if (m > l) read.push([s[l][h][m][g], `L${m}H${g}`]);
    }
    const top = list => list.sort((a, b) => b[0] - a[0]).slice(0, 3).map(([x, n]) => `${n} ${x.toFixed(2)}`).join(", ");
    if (reads.length) lines.push(`${mode}: reads ${top(reads)}`);
    if (read.length) lines.push(`${mode}: read by ${top(read)}`);
  }
  document.getElementById("composition").textContent =
    lines.length ? `L${l}H${h} · ${lines.join(" · ")}` : `L${l}H${h}: no other layer to compose with`;
}

function select(l, h) {
  selected = {l, h};
  document.querySelectorAll(".head").forEach(card =>
    card.classList.toggle("selected", +card.dataset.layer === l && +card.dataset.head === h));
  document.getElementById("selected").textContent = `L${l}H${h}`;
  const big = document.getElementById("big");
  drawHead(big, l, h);
  document.getElementById("big-title").textContent =
    `L${l}H${h} · ${views[view].name}${D.ablated.includes(`L${l}H${h}`) ? " · ablated" : ""}`;
  showComposition();
  if (query !== null) showQuery(query);
}

function showView(index) {
  view = index;
  query = null;
  document.getElementById("readout").textContent = "";
  document.querySelectorAll(".head").forEach(card => drawHead(card.querySelector("canvas"), +card.dataset.layer, +card.dataset.head));
  showScores();
  showBest();
  strips();
  bigTicks();
  select(selected.l, selected.h);
}

document.querySelectorAll(".head").forEach(card =>
  card.addEventListener("click", () => select(+card.dataset.layer, +card.dataset.head)));
document.querySelectorAll("input[name=view]").forEach(radio => radio.addEventListener("change", () => showView(+radio.value)));
document.querySelectorAll(".steps input").forEach(slider => slider.addEventListener("input", () => {
  const frames = D.steps[slider.dataset.layer], [step, src] = frames[+slider.value];
  const box = slider.closest(".steps");
  box.querySelector("img").src = src;
  box.querySelector(".step").textContent = `step ${step}`;
}));
showView(0);
