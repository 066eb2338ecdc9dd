// MathJax for pymdownx.arithmatex (generic mode): maths written $...$ or \(...\) inline, $$...$$ displayed.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex"
  }
};
if (typeof document$ !== "undefined") {  // Material's instant navigation: typeset each new page
  document$.subscribe(() => { if (window.MathJax.typesetPromise) { MathJax.typesetPromise(); } });
}
