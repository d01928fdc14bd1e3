// A link to an anchor inside a folded deep dive or solution opens the folds around it, so the target shows.
function openFoldsAroundTarget() {
  const id = decodeURIComponent(window.location.hash.slice(1));
  const target = id && document.getElementById(id);
  for (let node = target; node; node = node.parentElement) {
    if (node.tagName === "DETAILS") node.open = true;
  }
}
window.addEventListener("hashchange", openFoldsAroundTarget);
document.addEventListener("DOMContentLoaded", openFoldsAroundTarget);
