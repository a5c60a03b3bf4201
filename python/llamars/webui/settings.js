// The settings dialog: fields named like the settings keys, saved to localStorage on
// every change; the JSON schema is checked as it is typed.
import { samplingFields, SettingsError } from './api.js';
import { DEFAULT_SETTINGS, loadSettings, saveSettings } from './store.js';

export function setupSettings(onChange) {
  const dialog = document.getElementById('settings');
  const fields = [...dialog.querySelectorAll('[name]')];
  const error = document.getElementById('settings-error');
  const note = document.getElementById('settings-note');
  let settings = loadSettings();

  const isBox = (f) => f.type === 'checkbox'; // a checkbox setting is 'on' or ''
  const fill = () => {
    for (const f of fields) {
      if (isBox(f)) f.checked = settings[f.name] === 'on';
      else f.value = settings[f.name] ?? '';
    }
  };
  // Shows what is wrong with the settings (or nothing); returns the message.
  const check = () => {
    let msg = '';
    try {
      samplingFields(settings);
    } catch (e) {
      if (!(e instanceof SettingsError)) throw e;
      msg = e.message;
    }
    error.textContent = msg;
    error.hidden = !msg;
    return msg;
  };
  for (const f of fields) {
    f.addEventListener('input', () => {
      settings = { ...settings, [f.name]: isBox(f) ? (f.checked ? 'on' : '') : f.value };
      saveSettings(settings);
      check();
    });
    f.addEventListener('change', () => onChange(settings, f.name));
  }
  const close = () => {
    dialog.close();
    note.hidden = true;
  };
  document.getElementById('close-settings').addEventListener('click', close);
  document.getElementById('done-settings').addEventListener('click', close);
  document.getElementById('reset-settings').addEventListener('click', () => {
    settings = { ...DEFAULT_SETTINGS, api_key: settings.api_key };
    saveSettings(settings);
    fill();
    check();
    onChange(settings, null);
  });
  dialog.addEventListener('close', () => onChange(settings, null));
  fill();
  check();

  return {
    get: () => settings,
    check,
    // Opens the dialog, optionally with a note on top and the focus on one field.
    open(message, focusName) {
      fill();
      note.textContent = message || '';
      note.hidden = !message;
      if (!dialog.open) dialog.showModal();
      const f = focusName && fields.find((x) => x.name === focusName);
      if (f) f.focus();
    },
  };
}
