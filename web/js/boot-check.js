// Loaded as a plain script before the app's modules: when they cannot be loaded (a
// file missing after a half-finished update, a proxy or filter blocking them, a flaky
// connection), the page says so within seconds instead of spinning for ever.
// Rule: nothing here may depend on the modules (they are what failed), so the text is
// the static, three-language paragraph in index.html (#boot-failed), only revealed.
// Trap: a module that fails to load fires `error` on its <script> element (not on
// window), and a failing import inside it too; so listen in the capture phase, and
// also give up after WAIT_MS if the app never said it started (app.js sets
// <html data-started>).
(function () {
  var WAIT_MS = 15000;
  var shown = false;

  function show(reason) {
    if (shown || document.documentElement.dataset.started === 'true') return;
    var box = document.getElementById('boot-failed');
    if (!box) return;
    shown = true;
    box.classList.add('is-shown');
    box.setAttribute('data-reason', reason);
    var spinner = document.querySelector('#app .boot');
    if (spinner) spinner.style.display = 'none';
  }

  window.addEventListener(
    'error',
    function (event) {
      var target = event.target;
      if (target && target.tagName === 'SCRIPT') show('script');
      else if (event instanceof ErrorEvent && !document.documentElement.dataset.started) show('error');
    },
    true,
  );
  window.addEventListener('unhandledrejection', function () {
    if (!document.documentElement.dataset.started) show('error');
  });
  setTimeout(function () {
    show('timeout');
  }, WAIT_MS);
})();
