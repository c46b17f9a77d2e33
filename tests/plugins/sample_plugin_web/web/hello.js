// The sample plugin's page from its own web folder (tests/plugins/sample_plugin.py):
// text from the plugin's translations (ctx.t) and its own icon, both under /plugins/sample/.
export function render(root, ctx) {
  const icon = document.createElement('img');
  icon.src = 'plugins/sample/icon.svg';
  icon.alt = '';
  icon.width = 48;
  icon.height = 48;
  icon.dataset.testid = 'sample-hello-icon';
  const text = document.createElement('p');
  text.dataset.testid = 'sample-hello-text';
  text.textContent = ctx.t('sample.hello_text', { name: ctx.me.username });
  root.append(icon, text);
}
