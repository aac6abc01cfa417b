// Drives a flame graph's own script (uscope flamegraph's SVG) in jsdom, for
// tests/e2e/test_flamegraph.py:
//
//   node flame_dom.js FILE.svg ACTION...
//
// ACTIONs, in order: "click:N" clicks frame N (the Nth <g> of g#frames, in
// document order), "over:N" moves the mouse onto it, "unzoom" clicks Reset
// Zoom, "search:REGEX" clicks Search and answers the prompt with REGEX,
// "key:ESC" and "key:CTRL-F" press keys (the prompt then gets the last
// REGEX), "state" prints, as one JSON line, every frame's shown place and
// label and the texts around them.
"use strict";
const fs = require("fs");
const vm = require("vm");
const { JSDOM } = require("jsdom");

const [file, ...actions] = process.argv.slice(2);
const dom = new JSDOM(fs.readFileSync(file, "utf8"), {
	contentType: "image/svg+xml",
	runScripts: "outside-only",
});
const win = dom.window, doc = win.document;
let answer = null;
win.prompt = () => answer;
win.alert = (msg) => { throw new Error("alert: " + msg); };
// jsdom runs HTML's <script> elements, not SVG's: the one inline script is
// run here as a browser runs it, then the root's onload attribute
const scripts = doc.getElementsByTagName("script");
if (scripts.length !== 1 || scripts[0].hasAttribute("href"))
	throw new Error("not one inline script");
const ctx = dom.getInternalVMContext();
vm.runInContext(scripts[0].textContent, ctx, { filename: "svg-script" });
vm.runInContext("(function (evt) {" + doc.documentElement.getAttribute("onload") + "})", ctx)({});

const gs = () => Array.from(doc.getElementById("frames").children);
const text = (id) => doc.getElementById(id).textContent;

for (const a of actions) {
	const [what, arg] = [a.split(":")[0], a.slice(a.indexOf(":") + 1)];
	if (what === "click") {
		gs()[+arg].querySelector("rect").dispatchEvent(new win.MouseEvent("click", { bubbles: true }));
	} else if (what === "over") {
		gs()[+arg].querySelector("rect").dispatchEvent(new win.MouseEvent("mouseover", { bubbles: true }));
	} else if (what === "unzoom") {
		doc.getElementById("unzoom").dispatchEvent(new win.MouseEvent("click", { bubbles: true }));
	} else if (what === "search") {
		answer = arg;
		doc.getElementById("search").dispatchEvent(new win.MouseEvent("click", { bubbles: true }));
	} else if (what === "key") {
		const init = arg === "ESC" ? { keyCode: 27 } : { keyCode: 70, ctrlKey: true };
		win.dispatchEvent(new win.KeyboardEvent("keydown", init));
	} else if (what === "state") {
		console.log(JSON.stringify({
			frames: gs().map((g) => {
				const r = g.querySelector("rect");
				return {
					hidden: g.classList.contains("hide"),
					parent: g.classList.contains("parent"),
					x: +r.getAttribute("x"), width: +r.getAttribute("width"),
					fill: r.getAttribute("fill"),
					label: g.querySelector("text").textContent,
				};
			}),
			details: text("details"), matched: text("matched"), search: text("search"),
			unzoom_hidden: doc.getElementById("unzoom").classList.contains("hide"),
		}));
	} else {
		throw new Error("unknown action " + a);
	}
}
