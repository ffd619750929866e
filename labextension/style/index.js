import './palette.css';
import './base.css';
import './statusbar.css';
import './joblists.css';
import './submitform.css';
