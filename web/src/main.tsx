import { createRoot } from 'react-dom/client';

import { App } from './App';
import { installStreamErrorFilter } from './streamErrors';
import './styles.css';

installStreamErrorFilter();

const root = document.getElementById('root');
if (!root) throw new Error('missing #root');
// No StrictMode: its double-run of effects would connect and disconnect the room twice in development.
createRoot(root).render(<App />);
