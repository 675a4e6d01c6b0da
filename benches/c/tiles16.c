// 16x16 f32 tiles of a 16^6 tensor, walked without any per-tile set-up ("direct"), and the
// same through a 256 KiB staging buffer that makes both A's reads and B's writes 1 KiB runs
// ("staged"), beside memcpy. A stand-alone experiment behind docs/TUNING.md
// (`WHOLE_MICRO_MAX`), not part of the library; the permutation's last entry and
// second-last must not be 4 for the staged walk.
// Build and run (x86-64 with AVX-512):
//   gcc -O3 -march=native -o tiles16 benches/c/tiles16.c
//   ./tiles16 543210 1 0        # perm, streaming stores (1/0), prefetch distance in floats
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define E 16
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
// 16x16 f32 transpose: src rows at stride ss (floats), dst rows stride ds
static inline void t16(const float*s,long ss,float*d,long ds,int nt){
  __m512 r[16];
  for(int i=0;i<16;i++) r[i]=_mm512_loadu_ps(s+i*ss);
  // four stages: 32-bit, 64-bit, 128-bit and 256-bit interleaves
  __m512 t[16];
  for(int i=0;i<16;i+=2){t[i]=_mm512_unpacklo_ps(r[i],r[i+1]);t[i+1]=_mm512_unpackhi_ps(r[i],r[i+1]);}
  for(int i=0;i<16;i+=4){
    r[i]  =_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]),_mm512_castps_pd(t[i+2])));
    r[i+1]=_mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]),_mm512_castps_pd(t[i+2])));
    r[i+2]=_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i+1]),_mm512_castps_pd(t[i+3])));
    r[i+3]=_mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i+1]),_mm512_castps_pd(t[i+3])));
  }
  for(int i=0;i<16;i+=8){
    for(int k=0;k<4;k++){
      t[i+k]  =_mm512_shuffle_f32x4(r[i+k],r[i+k+4],0x88);
      t[i+k+4]=_mm512_shuffle_f32x4(r[i+k],r[i+k+4],0xdd);
    }
  }
  for(int k=0;k<8;k++){
    r[k]  =_mm512_shuffle_f32x4(t[k],t[k+8],0x88);
    r[k+8]=_mm512_shuffle_f32x4(t[k],t[k+8],0xdd);
  }
  for(int i=0;i<16;i++){ if(nt) _mm512_stream_ps(d+i*ds, r[i]); else _mm512_storeu_ps(d+i*ds,r[i]); }
}
int perm[6]; long sa[6], sb[6]; // sb[k]: B stride of A dim k (floats)
float *A,*B;
// direct: tile over (a5, J=perm[5]); loops: other 4 A dims in A order (innermost = largest A dim index)
void direct(int nt,long pf){
  int J=perm[5]; int o[4],n=0; for(int k=0;k<5;k++) if(k!=J) o[n++]=k;
  long N=1<<16;
  for(long u=0;u<N;u++){
    long x=u, oa=0, ob=0;
    for(int q=3;q>=0;q--){long v=x%16;x/=16;oa+=v*sa[o[q]];ob+=v*sb[o[q]];}
    if(pf){ for(int i=0;i<16;i++) _mm_prefetch((const char*)(A+oa+pf+i*sa[J]),_MM_HINT_T0);} 
    t16(A+oa,sa[J],B+ob,sb[5],nt);
  }
}
// staged: block = {a5, a4} x {J, J2} where J2 = perm[4] (B's 2nd fastest). Requires J2 != 4, J!=4.
static float buf[65536] __attribute__((aligned(64)));
void staged(int nt,long pf){
  int J=perm[5], J2=perm[4]; int o[2],n=0; for(int k=0;k<4;k++) if(k!=J&&k!=J2) o[n++]=k;
  for(long u=0;u<256;u++){
    long oa=(u/16)*sa[o[0]]+(u%16)*sa[o[1]], ob=(u/16)*sb[o[0]]+(u%16)*sb[o[1]];
    // phase 1: buf[(a5*16+a4)*256 + j2*16 + j] = A[j, j2, a4, a5]
    for(int j2=0;j2<16;j2++) for(int a4=0;a4<16;a4++){
      const float*s=A+oa+j2*sa[J2]+a4*16;
      if(pf) for(int i=0;i<16;i++) _mm_prefetch((const char*)(s+pf+i*sa[J]),_MM_HINT_T0);
      t16(s,sa[J],buf+a4*256+j2*16,16*256,0);
    }
    // phase 2: rows (a5,a4) of 256 floats to B
    for(int a5=0;a5<16;a5++) for(int a4=0;a4<16;a4++){
      float*d=B+ob+a5*sb[5]+a4*sb[4]; const float*s=buf+(a5*16+a4)*256;
      for(int c=0;c<256;c+=16){ __m512 v=_mm512_load_ps(s+c); if(nt) _mm512_stream_ps(d+c,v); else _mm512_storeu_ps(d+c,v);} 
    }
  }
}
int main(int argc,char**argv){
  if(argc<4){fprintf(stderr,"usage: %s PERM NT PF (e.g. 543210 1 0)\n",argv[0]);return 2;}
  for(int i=0;i<6;i++) perm[i]=argv[1][i]-'0';
  long N=1L<<24; A=aligned_alloc(2<<20,N*4); B=aligned_alloc(2<<20,N*4);
  for(long i=0;i<N;i++) A[i]=i;
  memset(B,0,N*4);
  for(int k=0;k<6;k++) sa[k]=1L<<(4*(5-k));
  for(int i=0;i<6;i++) sb[perm[i]]=1L<<(4*(5-i));
  int reps=5;
  for(int round=0;round<2;round++){
  double tc=1e9; for(int r=0;r<reps;r++){double t=now(); memcpy(B,A,N*4); t=now()-t; if(t<tc)tc=t;}
  double td=1e9; for(int r=0;r<reps;r++){double t=now(); direct(atoi(argv[2]),atol(argv[3])); t=now()-t; if(t<td)td=t;}
  // check direct
  int bad=0; for(long q=0;q<100000;q++){ long i=(q*2654435761L)%N; long x=i,ob=0; for(int k=5;k>=0;k--){ob+=(x%16)*sb[k];x/=16;} if(B[ob]!=A[i]) {bad++;} }
  memset(B,0,N*4);
  double ts=1e9; int J2=perm[4]; double ts_ok=(J2!=4&&perm[5]!=4);
  if(ts_ok) for(int r=0;r<reps;r++){double t=now(); staged(atoi(argv[2]),atol(argv[3])); t=now()-t; if(t<ts)ts=t;}
  int bad2=0; if(ts_ok) for(long q=0;q<100000;q++){ long i=(q*2654435761L)%N; long x=i,ob=0; for(int k=5;k>=0;k--){ob+=(x%16)*sb[k];x/=16;} if(B[ob]!=A[i]) {bad2++;} }
  printf("%s copy %.2f ms direct %.2f ms (%.3f) staged %.2f ms (%.3f) bad %d %d\n",argv[1],tc*1e3,td*1e3,tc/td,ts*1e3,tc/ts,bad,bad2);
  }
}
