// The example plugin's page: its own translations (ctx.t) and the motto from its route.
export function render(root, ctx) {
  const title = document.createElement('h2');
  title.textContent = ctx.t('example.heading');
  const text = document.createElement('p');
  text.dataset.testid = 'example-motto';
  text.textContent = ctx.t('example.loading');
  root.append(title, text);
  ctx.request('GET', 'api/plugin/example/motto').then(
    (out) => { text.textContent = ctx.t('example.motto', { motto: out.motto }); },
    () => { text.textContent = ctx.t('example.unavailable'); },
  );
}
