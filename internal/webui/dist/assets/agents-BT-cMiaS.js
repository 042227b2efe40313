function a(s){const e=s.capabilities;return{sessions:e.session_storage===!0&&!!s.session_storage&&s.session_storage!=="none",resume:e.resume===!0,readOnly:e.read_only_mode===!0,images:e.image_input===!0,cost:e.cost_tracking===!0}}function c(s){const e=[];for(const t of s.messages){if(t.role!=="user"&&t.role!=="assistant"||!t.text?.trim())continue;const n=e[e.length-1];n&&n.role===t.role?n.content+=`

${t.text}`:(e.length>0||t.role==="user")&&e.push({role:t.role,content:t.text})}return e.length>0&&e[e.length-1].role==="user"&&e.pop(),e}function u(s,e,t=8e3){const n=[];let l=0;for(let r=s.messages.length-1;r>=0;r--){const o=s.messages[r];if(o.role!=="user"&&o.role!=="assistant"||!o.text)continue;const i=`${o.role}: ${o.text}`;if(l+i.length>t)break;n.unshift(i),l+=i.length}return`${e}

---
Earlier conversation (session ${s.session.id}):

${n.join(`

`)}`}const g=s=>`maestro.live.history.${s}`;export{u as c,a as g,c as h,g as p};
