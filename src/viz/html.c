/* The viewer page: the data as one JSON block, drawn by inline JavaScript (no network, works from file://). The
 * script builds, per example, the prediction line, the highlighted words and the head view (SVG heatmap), and
 * the training curves above them. DOM hooks the tests rely on: .example, .pred, .words .tok[data-weight], .tags
 * .tok[data-tag],
 * svg.heatmap rect.cell[data-w], svg.chart polyline. */
#include <stdio.h>
#include <string.h>

#include "viz/viz_internal.h"

static const char page_css[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}"
    "h1{font-size:22px;margin:0 0 4px}.sub{color:#666;margin:0 0 18px}"
    ".example{border:1px solid #ddd;border-radius:8px;padding:14px 16px;margin:16px 0;background:#fff}"
    ".example h2{font-size:15px;margin:0 0 6px;font-weight:600}"
    ".pred{font-weight:600}.pred .p{color:#555;font-weight:400}.truth{color:#555;margin-left:12px}"
    ".ok{color:#1a7f37}.wrong{color:#c62828}"
    ".words{margin:10px 0;line-height:2.1}.tok{padding:2px 4px;margin:0 1px;border-radius:3px}"
    ".controls{margin:8px 0;color:#444}.controls select{margin:0 10px 0 4px}"
    ".mv summary{cursor:pointer;color:#444;margin:6px 0}.model-view th{font-weight:400;color:#555;font-size:12px;padding:2px 6px}"
    ".model-view canvas{image-rendering:pixelated;border:1px solid #ddd;cursor:pointer}"
    "svg text{font:11px system-ui,sans-serif;fill:#333}.cell:hover{stroke:#000;stroke-width:1}"
    ".charts{display:flex;flex-wrap:wrap;gap:16px}.legend{font-size:12px}"
    ".hm{overflow-x:auto}"
    ".tags{margin:10px 0;line-height:2.6}.tags .tok{display:inline-block;text-align:center;margin:0 2px;padding:0 5px}"
    ".tags .tok sub{display:block;font-size:10px;line-height:1.1;color:#444}.tags .start{border-left:3px solid #333}";

/* Colours: words in orange (alpha = weight / max weight), heatmap cells white -> dark blue. */
static const char page_js[] =
    "(function(){\n"
    "'use strict';\n"
    "var D=JSON.parse(document.getElementById('qkv-data').textContent);\n"
    "var NS='http://www.w3.org/2000/svg';\n"
    "function el(t,a,p){var e=document.createElement(t);for(var k in a)e.setAttribute(k,a[k]);if(p)p.appendChild(e);return e;}\n"
    "function sv(t,a,p){var e=document.createElementNS(NS,t);for(var k in a)e.setAttribute(k,a[k]);if(p)p.appendChild(e);return e;}\n"
    "function fin(v){return typeof v==='number'&&isFinite(v);}\n"
    "function txt(p,s){p.appendChild(document.createTextNode(s));return p;}\n"
    "function w(m,h,i,j){return m.w[(h*m.rows.length+i)*m.cols.length+j];}\n"
    "/* head h, or the mean over heads when h<0 */\n"
    "function wh(m,h,i,j){if(h>=0)return w(m,h,i,j);var s=0;for(var k=0;k<m.heads;k++)s+=w(m,k,i,j);return s/m.heads;}\n"
    "function blue(v){var c=Math.round(255*(1-Math.min(1,Math.max(0,v))));return 'rgb('+Math.round(c*0.9)+','+Math.round(c*0.95+12)+',255)';}\n"
    "function option(sel,value,label){var o=el('option',{value:value},sel);txt(o,label);return o;}\n"
    "/* words highlighted by row r of the chosen highlight maps (-1: average of them all), mean over heads */\n"
    "function drawWords(div,ex,which){div.textContent='';var hs=ex.maps.filter(function(m){return m.highlight;});\n"
    "  var use=which<0?hs:[hs[which]];var v=ex.tokens.map(function(_,j){var s=0;use.forEach(function(m){s+=wh(m,-1,ex.highlight_row,j);});return s/use.length;});\n"
    "  var mx=Math.max.apply(null,v.concat([1e-9]));\n"
    "  ex.tokens.forEach(function(t,j){var s=el('span',{'class':'tok','data-weight':v[j].toFixed(4),title:t+': '+v[j].toFixed(3)},div);\n"
    "    s.style.background='rgba(255,140,0,'+(v[j]/mx).toFixed(3)+')';txt(s,t);txt(div,' ');});}\n"
    "function drawHeatmap(div,m,h){div.textContent='';var R=m.rows.length,C=m.cols.length;\n"
    "  var cs=Math.max(8,Math.min(26,Math.floor(640/Math.max(R,C))));\n"
    "  var lw=8+7*Math.min(16,Math.max.apply(null,m.rows.map(function(s){return s.length;}))),th=8+7*Math.min(16,Math.max.apply(null,m.cols.map(function(s){return s.length;})));\n"
    "  var g=sv('svg',{'class':'heatmap',width:lw+C*cs+60,height:th+R*cs+10},div);\n"
    "  m.cols.forEach(function(t,j){var x=lw+j*cs+cs/2,y=th-4;var e=sv('text',{x:x,y:y,transform:'rotate(-60 '+x+' '+y+')'},g);e.textContent=t.slice(0,16);});\n"
    "  m.rows.forEach(function(t,i){var e=sv('text',{x:lw-4,y:th+i*cs+cs/2+4,'text-anchor':'end'},g);e.textContent=t.slice(0,16);\n"
    "    for(var j=0;j<C;j++){var v=wh(m,h,i,j);var r=sv('rect',{'class':'cell',x:lw+j*cs,y:th+i*cs,width:cs,height:cs,fill:blue(v),'data-w':v.toFixed(4)},g);\n"
    "      sv('title',{},r).textContent=t+' \\u2192 '+m.cols[j]+': '+v.toFixed(3);}});\n"
    "  for(var k=0;k<=10;k++)sv('rect',{x:lw+C*cs+16,y:th+(10-k)*Math.max(4,R*cs/11),width:12,height:Math.max(4,R*cs/11),fill:blue(k/10)},g);\n"
    "  sv('text',{x:lw+C*cs+30,y:th+10},g).textContent='1';sv('text',{x:lw+C*cs+30,y:th+11*Math.max(4,R*cs/11)},g).textContent='0';}\n"
    "/* model view (bertviz): every layer x head as a thumbnail; a canvas keeps long inputs light */\n"
    "function drawThumb(p,m,h,sz){var R=m.rows.length,C=m.cols.length;var c=el('canvas',{'class':'thumb',width:C,height:R,'data-head':h},p);\n"
    "  c.style.width=sz+'px';c.style.height=Math.max(4,Math.round(sz*R/C))+'px';var x=c.getContext('2d');if(!x)return c;var img=x.createImageData(C,R);\n"
    "  for(var i=0;i<R;i++)for(var j=0;j<C;j++){var v=Math.min(1,Math.max(0,wh(m,h,i,j))),q=(i*C+j)*4,cc=Math.round(255*(1-v));\n"
    "    img.data[q]=Math.round(cc*0.9);img.data[q+1]=Math.round(cc*0.95+12);img.data[q+2]=255;img.data[q+3]=255;}\n"
    "  x.putImageData(img,0,0);return c;}\n"
    "function drawModelView(div,ex,pick){var t=el('table',{'class':'model-view'},div);var hr=el('tr',{},t);el('th',{},hr);\n"
    "  var H=Math.max.apply(null,ex.maps.map(function(m){return m.heads;}));for(var h=0;h<H;h++)txt(el('th',{},hr),'head '+(h+1));\n"
    "  ex.maps.forEach(function(m,k){var r=el('tr',{},t);txt(el('th',{},r),m.name);for(var h=0;h<H;h++){var c=el('td',{},r);\n"
    "    if(h<m.heads){var g=drawThumb(c,m,h,72);g.title=m.name+', head '+(h+1);g.onclick=(function(k,h){return function(){pick(k,h);};})(k,h);}}});}\n"
    "function tagColour(t){var h=0;for(var i=0;i<t.length;i++)h=(h*31+t.charCodeAt(i))%360;return 'hsl('+h+',70%,85%)';}\n"
    "function drawExample(root,ex,n){var card=el('div',{'class':'example',id:'example-'+n},root);\n"
    "  if(ex.title)txt(el('h2',{},card),ex.title);\n"
    "  if(ex.prediction!==null){var line=el('div',{},card);var p=el('span',{'class':'pred'},line);txt(p,'prediction: '+ex.prediction);\n"
    "    if(ex.probability>=0)txt(el('span',{'class':'p'},p),' (p = '+ex.probability.toFixed(3)+')');\n"
    "    if(ex.truth!==null){var t=el('span',{'class':'truth '+(ex.truth===ex.prediction?'ok':'wrong')},line);txt(t,'gold: '+ex.truth+(ex.truth===ex.prediction?' \\u2713':' \\u2717'));}}\n"
    "  var hs=ex.maps.filter(function(m){return m.highlight;});\n"
    "  if(hs.length&&ex.highlight_row>=0){var c=el('div',{'class':'controls'},card);txt(c,'words weighted by the attention of \\u201c'+hs[0].rows[ex.highlight_row]+'\\u201d:');\n"
    "    var s=el('select',{'class':'hl-layer'},c);option(s,-1,'average over heads and layers');hs.forEach(function(m,k){option(s,k,m.name+' (average over heads)');});\n"
    "    var wd=el('div',{'class':'words'},card);drawWords(wd,ex,-1);s.onchange=function(){drawWords(wd,ex,+s.value);};}\n"
    "  else if(ex.tokens.length&&!ex.tags){var wd2=el('div',{'class':'words'},card);ex.tokens.forEach(function(t){txt(el('span',{'class':'tok','data-weight':'0'},wd2),t);txt(wd2,' ');});}\n"
    "  if(ex.tags){var tg=el('div',{'class':'tags'},card);ex.tokens.forEach(function(t,j){var g=ex.tags[j],bio=/^[BI]-./.test(g),ty=bio?g.slice(2):g;\n"
    "    var s=el('span',{'class':'tok'+(g[0]==='B'&&bio?' start':''),'data-tag':g,title:t+': '+g},tg);if(g!=='O')s.style.background=tagColour(ty);\n"
    "    txt(s,t);txt(el('sub',{},s),g);});}\n"
    "  if(!ex.maps.length)return;\n"
    "  var hc=el('div',{'class':'controls'},card);txt(hc,'head view \\u2014 map:');var ls=el('select',{'class':'hv-layer'},hc);\n"
    "  ex.maps.forEach(function(m,k){option(ls,k,m.name+' ('+m.kind+')');});txt(hc,'head:');var hsel=el('select',{'class':'hv-head'},hc);\n"
    "  var hm=el('div',{'class':'hm'},card);\n"
    "  function heads(){hsel.textContent='';var m=ex.maps[+ls.value];option(hsel,-1,'average of '+m.heads+' head'+(m.heads>1?'s':''));for(var h=0;h<m.heads;h++)option(hsel,h,'head '+(h+1));}\n"
    "  function draw(){drawHeatmap(hm,ex.maps[+ls.value],+hsel.value);}\n"
    "  ls.onchange=function(){heads();draw();};hsel.onchange=draw;heads();draw();\n"
    "  var mv=el('details',{'class':'mv'},card);txt(el('summary',{},mv),'model view: every layer and head (click one to show it above)');\n"
    "  drawModelView(mv,ex,function(k,h){ls.value=k;heads();hsel.value=h;draw();});}\n"
    "function drawChart(root,name,cs){var W=460,H=260,L=50,B=36,T=24,Rt=24;var xs=[],ys=[];\n"
    "  cs.forEach(function(c){c.x.forEach(function(v,i){if(fin(v)&&fin(c.y[i])){xs.push(v);ys.push(c.y[i]);}});});if(!xs.length)return;\n"
    "  var x0=Math.min.apply(null,xs),x1=Math.max.apply(null,xs),y0=Math.min.apply(null,ys),y1=Math.max.apply(null,ys);if(x1==x0)x1=x0+1;if(y1==y0){y1+=0.5;y0-=0.5;}\n"
    "  var g=sv('svg',{'class':'chart',width:W,height:H},root);sv('text',{x:L,y:14,'font-weight':'600'},g).textContent=name;\n"
    "  function X(v){return L+(v-x0)/(x1-x0)*(W-L-Rt);}function Y(v){return H-B-(v-y0)/(y1-y0)*(H-B-T);}\n"
    "  sv('line',{x1:L,y1:H-B,x2:W-Rt,y2:H-B,stroke:'#888'},g);sv('line',{x1:L,y1:T,x2:L,y2:H-B,stroke:'#888'},g);\n"
    "  for(var k=0;k<=4;k++){var yv=y0+(y1-y0)*k/4,xv=x0+(x1-x0)*k/4;sv('text',{x:L-4,y:Y(yv)+4,'text-anchor':'end'},g).textContent=+yv.toPrecision(3);\n"
    "    sv('text',{x:X(xv),y:H-B+14,'text-anchor':'middle'},g).textContent=+xv.toPrecision(4);}\n"
    "  var col=['#1f77b4','#d62728','#2ca02c','#ff7f0e','#9467bd','#8c564b'];\n"
    "  cs.forEach(function(c,k){var pts=[];c.x.forEach(function(v,i){if(fin(v)&&fin(c.y[i]))pts.push(X(v).toFixed(1)+','+Y(c.y[i]).toFixed(1));});\n"
    "    sv('polyline',{points:pts.join(' '),fill:'none',stroke:col[k%6],'stroke-width':1.5,'data-name':c.name},g);\n"
    "    sv('text',{x:W-Rt-4,y:T+14*k+10,'text-anchor':'end','class':'legend',style:'fill:'+col[k%6]},g).textContent=c.name;});}\n"
    "document.title=D.title;txt(document.getElementById('title'),D.title);if(D.subtitle)txt(document.getElementById('subtitle'),D.subtitle);\n"
    "var charts={},order=[];D.curves.forEach(function(c){if(!charts[c.chart]){charts[c.chart]=[];order.push(c.chart);}charts[c.chart].push(c);});\n"
    "var cr=document.getElementById('curves');order.forEach(function(n){drawChart(cr,n,charts[n]);});\n"
    "var root=document.getElementById('examples');D.examples.forEach(function(ex,n){drawExample(root,ex,n);});\n"
    "document.body.setAttribute('data-rendered','1');\n"
    "})();\n";

static qkv_status check_example(const qkv_viz_example *ex, int n) {
    char where[64];
    snprintf(where, sizeof where, "example %d", n);
    if (ex->n_tokens < 0 || (ex->n_tokens > 0 && !ex->tokens) || ex->n_maps < 0 || (ex->n_maps > 0 && !ex->maps))
        return qkv_error_set(QKV_ERR_INVALID, "viewer: %s: tokens or maps missing for the counts given", where);
    for (int t = 0; t < ex->n_tokens; t++)
        if (!ex->tokens[t] || (ex->tags && !ex->tags[t]))
            return qkv_error_set(QKV_ERR_INVALID, "viewer: %s: token %d or its tag is NULL", where, t);
    for (int k = 0; k < ex->n_maps; k++) {
        const qkv_viz_map *m = &ex->maps[k];
        snprintf(where, sizeof where, "example %d map %d", n, k);
        qkv_status st = qkv__viz_check_map(m, where);
        if (st) return st;
        if (m->highlight && ex->highlight_row >= 0 && (m->n_cols != ex->n_tokens || ex->highlight_row >= m->n_rows))
            return qkv_error_set(QKV_ERR_INVALID,
                                 "viewer: %s highlights the words: it needs %d columns (one per token) and a row %d, "
                                 "has %d x %d",
                                 where, ex->n_tokens, ex->highlight_row, m->n_rows, m->n_cols);
    }
    return QKV_OK;
}

static void put_labels(viz_buf *b, int n, const char *const *labels) {
    qkv__viz_buf_put(b, "[");
    for (int i = 0; i < n; i++) {
        if (i) qkv__viz_buf_put(b, ",");
        qkv__viz_buf_json_str(b, labels[i]);
    }
    qkv__viz_buf_put(b, "]");
}

static void put_map(viz_buf *b, const qkv_viz_map *m, int k) {
    char name[32];
    snprintf(name, sizeof name, "map %d", k + 1);
    qkv__viz_buf_put(b, "{\"name\":");
    qkv__viz_buf_json_str(b, m->name ? m->name : name);
    qkv__viz_buf_put(b, ",\"kind\":");
    qkv__viz_buf_json_str(b, m->kind ? m->kind : "self");
    qkv__viz_buf_printf(b, ",\"heads\":%d,\"highlight\":%s,\"rows\":", m->n_heads, m->highlight ? "true" : "false");
    put_labels(b, m->n_rows, m->row_labels);
    qkv__viz_buf_put(b, ",\"cols\":");
    put_labels(b, m->n_cols, viz_cols(m));
    qkv__viz_buf_put(b, ",\"w\":[");
    long long n = (long long)m->n_heads * m->n_rows * m->n_cols;
    for (long long i = 0; i < n; i++) {
        if (i) qkv__viz_buf_put(b, ",");
        qkv__viz_buf_num(b, m->weights[i]);
    }
    qkv__viz_buf_put(b, "]}");
}

static void put_example(viz_buf *b, const qkv_viz_example *ex) {
    qkv__viz_buf_put(b, "{\"title\":");
    qkv__viz_buf_json_str(b, ex->title);
    qkv__viz_buf_put(b, ",\"tokens\":");
    put_labels(b, ex->n_tokens, ex->tokens);
    qkv__viz_buf_printf(b, ",\"highlight_row\":%d,\"prediction\":", ex->highlight_row < 0 ? -1 : ex->highlight_row);
    qkv__viz_buf_json_str(b, ex->prediction);
    qkv__viz_buf_put(b, ",\"probability\":");
    qkv__viz_buf_num(b, ex->probability >= 0 ? ex->probability : -1);
    qkv__viz_buf_put(b, ",\"truth\":");
    qkv__viz_buf_json_str(b, ex->truth);
    qkv__viz_buf_put(b, ",\"tags\":");
    if (ex->tags) put_labels(b, ex->n_tokens, ex->tags);
    else qkv__viz_buf_put(b, "null");
    qkv__viz_buf_put(b, ",\"maps\":[");
    for (int k = 0; k < ex->n_maps; k++) {
        if (k) qkv__viz_buf_put(b, ",");
        put_map(b, &ex->maps[k], k);
    }
    qkv__viz_buf_put(b, "]}");
}

static void put_curve(viz_buf *b, const qkv_viz_curve *c) {
    qkv__viz_buf_put(b, "{\"chart\":");
    qkv__viz_buf_json_str(b, c->chart ? c->chart : "curves");
    qkv__viz_buf_put(b, ",\"name\":");
    qkv__viz_buf_json_str(b, c->name ? c->name : "");
    /* JSON has no NaN: a skipped point is written as null (the script treats it as non-finite). */
    for (int axis = 0; axis < 2; axis++) {
        const double *v = axis ? c->y : c->x;
        qkv__viz_buf_put(b, axis ? ",\"y\":[" : ",\"x\":[");
        for (int i = 0; i < c->n; i++) {
            if (i) qkv__viz_buf_put(b, ",");
            bool ok = v[i] == v[i] && v[i] - v[i] == 0; /* finite */
            if (ok) qkv__viz_buf_printf(b, "%.6g", v[i]);
            else qkv__viz_buf_put(b, "null");
        }
        qkv__viz_buf_put(b, "]");
    }
    qkv__viz_buf_put(b, "}");
}

qkv_status qkv_viz_write_html(const char *path, const qkv_viz_page *page) {
    if (!path || !page) return qkv_error_set(QKV_ERR_INVALID, "viewer: path or page is NULL");
    if (page->n_examples < 0 || (page->n_examples > 0 && !page->examples) || page->n_curves < 0 ||
        (page->n_curves > 0 && !page->curves))
        return qkv_error_set(QKV_ERR_INVALID, "viewer: examples or curves missing for the counts given");
    for (int i = 0; i < page->n_examples; i++) {
        qkv_status st = check_example(&page->examples[i], i);
        if (st) return st;
    }
    for (int i = 0; i < page->n_curves; i++) {
        const qkv_viz_curve *c = &page->curves[i];
        if (c->n < 0 || (c->n > 0 && (!c->x || !c->y)))
            return qkv_error_set(QKV_ERR_INVALID, "viewer: curve %d ('%s'): points missing", i,
                                 c->name ? c->name : "");
    }
    const char *title = page->title ? page->title : "qkv attention viewer";
    viz_buf b = {0};
    qkv__viz_buf_put(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>");
    qkv__viz_buf_xml(&b, title);
    qkv__viz_buf_put(&b, "</title>\n<style>");
    qkv__viz_buf_put(&b, page_css);
    qkv__viz_buf_put(&b, "</style></head>\n<body>\n<h1 id=\"title\"></h1><p class=\"sub\" id=\"subtitle\"></p>\n"
                    "<div class=\"charts\" id=\"curves\"></div>\n<div id=\"examples\"></div>\n"
                    "<noscript>This page draws its content with JavaScript.</noscript>\n"
                    "<script type=\"application/json\" id=\"qkv-data\">{\"title\":");
    qkv__viz_buf_json_str(&b, title);
    qkv__viz_buf_put(&b, ",\"subtitle\":");
    qkv__viz_buf_json_str(&b, page->subtitle);
    qkv__viz_buf_put(&b, ",\"curves\":[");
    for (int i = 0; i < page->n_curves; i++) {
        if (i) qkv__viz_buf_put(&b, ",");
        put_curve(&b, &page->curves[i]);
    }
    qkv__viz_buf_put(&b, "],\n\"examples\":[");
    for (int i = 0; i < page->n_examples; i++) {
        qkv__viz_buf_put(&b, i ? ",\n" : "");
        put_example(&b, &page->examples[i]);
    }
    qkv__viz_buf_put(&b, "]}</script>\n<script>\n");
    qkv__viz_buf_put(&b, page_js);
    qkv__viz_buf_put(&b, "</script>\n</body></html>\n");
    qkv_status st = qkv__viz_buf_save(&b, path);
    qkv__viz_buf_free(&b);
    return st;
}
